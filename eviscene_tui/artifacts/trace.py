"""Source traces and teacher episodes (psd-run-format §3), loaded fast and lazily.

``load_trace(path)`` of a small trace reads the file once and parses it once with
orjson. A big one (``LAZY_MIN_BYTES`` and up) is *indexed* instead
(:mod:`~eviscene_tui.artifacts.step_index`): one scan of the bytes records each step's
byte range, and a step is parsed from its range when it is asked for (a few are kept);
its :class:`StepBrief` (the light projection list views show) is kept, the step's heavy
fields (token ids, top-k, page text) are not. A gzip trace is indexed while it is
decompressed once into a temporary file (in ``spool_dir``, the app's work directory;
never beside the evidence). Anything the index cannot handle exactly goes to the
whole-file parse, which reports problems precisely; so does a trace whose range later
fails to parse as one object (:attr:`SourceTrace.broken` says so).

Nothing is validated up front: :class:`SourceTrace` builds a
:class:`~eviscene_tui.artifacts.models.TraceStep` (pydantic) only when a step is asked
for (LRU-cached), and a :class:`StepBrief` (plain slotted object, for list views) on
demand (cached). Hashes are lazy too.

Previews in a :class:`StepBrief` are raw text cut to one line (whitespace runs collapsed,
truncated); they are NOT sanitised: the UI passes them through ``safe_text`` like any
other run-derived string.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import stat
import tempfile
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import orjson

from eviscene_tui import switches
from eviscene_tui.artifacts.chunked_trace import _sentinel, parse_trace_chunked
from eviscene_tui.artifacts.fileio import LIMITS, ReadRefused, not_regular, open_regular, read_regular, too_large
from eviscene_tui.artifacts.jsonio import canonical_json_bytes, canonical_sha256, sha256_file
from eviscene_tui.artifacts.step_index import StepIndex, index_steps, read_range
from eviscene_tui.artifacts.models import (
    PROTOCOL_REJECTION_ACTIONS,
    StoreDescriptor,
    TokenCapture,
    TraceStep,
    parse_model,
)
from eviscene_tui.artifacts.problems import Problem, ProblemCode

PREVIEW_CHARS = 160
_STEP_CACHE_SIZE = 512
MAX_GZIP_TRACE_BYTES = LIMITS["trace"]
CHUNKED_MIN_BYTES = 16 << 20  # plain traces this big are parsed in chunks of steps
CHUNKED_MIN_GZ_BYTES = 2 << 20  # and gzip traces this big (compressed)
LAZY_MIN_BYTES = 16 << 20  # plain traces this big are indexed, their steps parsed on demand
LAZY_MIN_GZ_BYTES = 2 << 20  # and gzip traces this big (compressed)
_LAZY_STEP_CACHE = 8  # parsed steps (and TraceStep models) kept by an indexed trace


class LazySteps(Sequence[Any]):
    """The steps of an indexed trace as a read-only sequence: ``steps[i]`` parses step
    ``i`` from its byte range (the last few are kept). A range that is not one JSON
    object gives ``None`` and is recorded in :attr:`bad` (the trace is then ``broken``).
    Thread-safe (a background worker and the UI thread read ranges at once)."""

    def __init__(self, index: StepIndex, path: Path, *, spool: BinaryIO | None = None, cache_size: int = _LAZY_STEP_CACHE) -> None:
        self.step_index = index
        self.path = path
        self._spool = spool  # a temporary decompressed copy (gzip); the ranges refer to it
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._cache_size = cache_size
        self.bad: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.step_index)

    def _fileno(self) -> int:
        if self._spool is not None:
            return self._spool.fileno()
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO swapped in cannot block
                st = os.fstat(self._fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size != self.step_index.size:
                    os.close(self._fd)
                    self._fd = None
                    raise OSError("the trace file changed since it was indexed")
            return self._fd

    def step_bytes(self, index: int) -> bytes:
        """The JSON bytes of step ``index`` (read again each time; raises ``OSError``)."""
        start, end = self.step_index.span(index)
        return read_range(self._fileno(), start, end)

    def parse(self, index: int, *, keep: bool = True) -> Any:
        """Step ``index`` parsed from its range; ``keep=False`` leaves it out of the cache
        (a view that shows one step and drops it)."""
        if index < 0:
            index += len(self.step_index)
        if not 0 <= index < len(self.step_index):
            raise IndexError(index)
        with self._lock:
            if index in self._cache:
                self._cache.move_to_end(index)
                return self._cache[index]
        start, end = self.step_index.span(index)
        try:
            value = orjson.loads(self.step_bytes(index))
        except orjson.JSONDecodeError as exc:
            value = None
            self.bad.setdefault(index, f"step {index} (bytes {start}-{end}) is not one JSON object: {exc}")
        except OSError as exc:
            value = None
            self.bad.setdefault(index, f"step {index} cannot be read: {exc}")
        else:
            if not isinstance(value, dict):
                self.bad.setdefault(index, f"step {index} (bytes {start}-{end}) is not a JSON object")
                value = None
        if not keep:
            return value
        with self._lock:
            self._cache[index] = value
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return value

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self.parse(i) for i in range(*index.indices(len(self.step_index)))]
        return self.parse(index)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._spool is not None:
                self._spool.close()
                self._spool = None

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        try:
            self.close()
        except (OSError, AttributeError):
            pass


class StepBrief:
    """One row of the step list: cheap, precomputed preview fields (raw, not sanitised)."""

    __slots__ = (
        "index",
        "stage",
        "action_type",
        "tool_name",
        "args_preview",
        "result_preview",
        "text_preview",
        "is_policy_step",
        "has_token_capture",
        "token_capture_status",
        "context_request_id",
        "interaction_id",
        "psd_role",
        "is_protocol_rejection",
        "is_object",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.stage: str | None = None
        self.action_type: str | None = None
        self.tool_name: str | None = None
        self.args_preview: str = ""
        self.result_preview: str = ""
        self.text_preview: str = ""
        self.is_policy_step = False
        self.has_token_capture = False
        self.token_capture_status: str | None = None
        self.context_request_id: str | None = None
        self.interaction_id: str | None = None
        self.psd_role: str | None = None
        self.is_protocol_rejection = False
        self.is_object = True

    # aliases with the names used in the brief
    @property
    def tool_args_preview(self) -> str:
        return self.args_preview

    @property
    def tool_result_preview(self) -> str:
        return self.result_preview

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"StepBrief({self.index}, {self.stage!r}, {self.action_type!r}, {self.tool_name!r})"


def one_line(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A raw one-line preview: strings as is, other JSON compact; whitespace collapsed."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value[: limit * 4]
    else:
        try:
            text = orjson.dumps(value).decode("utf-8", "replace")[: limit * 4]
        except (TypeError, orjson.JSONEncodeError):
            text = repr(value)[: limit * 4]
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def pretty_json_text(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8", "replace")
    except (TypeError, orjson.JSONEncodeError):
        return repr(value)


class SourceTrace:
    """A parsed trace (source trace or teacher episode) with lazy per-step access."""

    def __init__(
        self,
        raw: dict[str, Any],
        path: Path | None = None,
        *,
        size_bytes: int | None = None,
        steps: LazySteps | None = None,
        gzip: bool = False,
        index_seconds: float | None = None,
    ) -> None:
        self.raw = raw
        self.path = path
        self.size_bytes = size_bytes
        self.gzip = gzip  # read from a gzip file (its first open decompresses it)
        self.index_seconds = index_seconds  # how long the byte scan took (indexed traces)
        state = raw.get("state")
        self._state: dict[str, Any] = state if isinstance(state, dict) else {}
        self._steps: Sequence[Any]
        if steps is not None:
            self._steps = steps
        else:
            in_state, at_top = self._state.get("all_steps"), raw.get("all_steps")
            self._steps = in_state if isinstance(in_state, list) else at_top if isinstance(at_top, list) else []
        self._lazy = steps
        self._cache_size = _LAZY_STEP_CACHE if steps is not None else _STEP_CACHE_SIZE
        self._brief_lock = threading.Lock()
        self._step_cache: OrderedDict[int, TraceStep] = OrderedDict()
        self._briefs: list[StepBrief | None] = [None] * len(self._steps)
        self._quick: dict[int, StepBrief] = {}  # briefs from a cut parse (indexed traces), see quick_brief
        self._policy_indices: list[int] | None = None
        self._canonical: str | None = None
        self._file_sha: str | None = None

    # ---------------------------------------------------------------- identity
    @property
    def state(self) -> dict[str, Any]:
        return self._state

    @property
    def raw_steps(self) -> Sequence[Any]:
        """The raw steps: a list, or for an indexed trace a :class:`LazySteps` (each
        item parsed from its byte range when it is read)."""
        return self._steps

    @property
    def lazy(self) -> bool:
        """Whether the steps are parsed on demand from an index of their byte ranges."""
        return self._lazy is not None

    @property
    def broken(self) -> Problem | None:
        """For an indexed trace: a problem when a step's range did not parse as one
        object (the index is not trustworthy: load the trace with ``lazy=False``)."""
        if self._lazy is None or not self._lazy.bad:
            return None
        first = min(self._lazy.bad)
        return Problem(code=ProblemCode.JSON_INVALID, path=str(self.path), message="trace: " + self._lazy.bad[first])

    def step_bytes(self, index: int) -> bytes | None:
        """The JSON bytes of one step of an indexed trace (re-read from the file), or
        ``None`` for a trace held in memory or an unreadable range."""
        if self._lazy is None:
            return None
        try:
            return self._lazy.step_bytes(index)
        except OSError:
            return None

    @property
    def step_count(self) -> int:
        return len(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    @property
    def episode_id(self) -> str | None:
        value = self.raw.get("image_id")
        if value is None:
            value = self._state.get("image_id")
        return value if isinstance(value, str) else (str(value) if value is not None else None)

    @property
    def case_id(self) -> str | None:
        value = self.raw.get("case_id")
        if value is None:
            rc = self._state.get("runtime_case")
            if isinstance(rc, dict):
                value = rc.get("case_id")
        if value is None:
            inv = self._state.get("investigation_state")
            if isinstance(inv, dict):
                value = inv.get("case_id")
        return value if isinstance(value, str) else (str(value) if value is not None else None)

    @property
    def runtime_store(self) -> StoreDescriptor | None:
        model, _ = parse_model(StoreDescriptor, self._state.get("runtime_store"))
        return model

    @property
    def verdict(self) -> Any:
        return self.raw.get("verdict")

    # ---------------------------------------------------------------- hashes
    def canonical_sha256(self) -> str:
        """Canonical JSON sha of the whole trace (§6); computed once. An indexed trace is
        hashed step by step (one parsed step alive at a time), not as one object."""
        if self._canonical is None:
            self._canonical = canonical_sha256(self.raw) if self._lazy is None else self._streamed_canonical_sha256()
        return self._canonical

    def _streamed_canonical_sha256(self) -> str:
        assert self._lazy is not None
        sentinel, _ = _sentinel()
        doc = dict(self.raw)
        if self._lazy.step_index.steps_at == "state":
            doc["state"] = {**self._state, "all_steps": sentinel}
        else:
            doc["all_steps"] = sentinel
        skeleton = canonical_json_bytes(doc)
        marker = canonical_json_bytes(sentinel)
        head, tail = skeleton.split(marker, 1)
        h = hashlib.sha256(head)
        h.update(b"[")
        for i in range(len(self._lazy)):
            if i:
                h.update(b",")
            h.update(canonical_json_bytes(self._lazy.parse(i), floats_likely=True))
        h.update(b"]")
        h.update(tail)
        return h.hexdigest()

    def file_sha256(self) -> str | None:
        """sha256 of the file bytes (re-read lazily; None if unreadable)."""
        if self._file_sha is None and self.path is not None:
            try:
                self._file_sha = sha256_file(self.path)
            except OSError:
                return None
        return self._file_sha

    # ---------------------------------------------------------------- steps
    def raw_step(self, index: int) -> Any:
        return self._steps[index]

    def step(self, index: int) -> TraceStep:
        """The validated step (tolerant; a non-object step gives an empty TraceStep)."""
        if index < 0:
            index += len(self._steps)
        if not 0 <= index < len(self._steps):
            raise IndexError(index)
        with self._brief_lock:
            cached = self._step_cache.get(index)
            if cached is not None:
                self._step_cache.move_to_end(index)
                return cached
        raw = self._steps[index]
        model, _ = parse_model(TraceStep, raw)
        if model is None:
            model = TraceStep()
        with self._brief_lock:
            self._step_cache[index] = model
            while len(self._step_cache) > self._cache_size:
                self._step_cache.popitem(last=False)
        return model

    def brief(self, index: int) -> StepBrief:
        if index < 0:
            index += len(self._steps)
        if not 0 <= index < len(self._steps):
            raise IndexError(index)
        cached = self._briefs[index]
        if cached is None:
            raw = self._steps[index]
            cached = _make_brief(index, raw)
            if self._lazy is not None and raw is None and index in self._lazy.bad:
                cached.is_object = False
                cached.text_preview = "(this step's bytes are not one JSON object)"
            self._briefs[index] = cached
        return cached

    def quick_brief(self, index: int) -> StepBrief:
        """The brief, for an indexed trace built from the step's bytes with the token
        capture's id, logprob and top-k lists cut out before the parse (they are most of
        a step's bytes and no part of a brief): a fraction of a full parse, for rows the
        operator is waiting for. :meth:`brief` (a full parse) stays the reference; the
        viewer's background fill builds it for every step and replaces a row that differs.
        Falls back to :meth:`brief` whenever the cut does not leave one JSON object."""
        if index < 0:
            index += len(self._steps)
        known = self._briefs[index] if 0 <= index < len(self._briefs) else None
        if known is not None or self._lazy is None:
            return self.brief(index)
        quick = self._quick.get(index)
        if quick is not None:
            return quick
        raw = self._cut_parse(index)
        if raw is None:
            return self.brief(index)
        quick = _make_brief(index, raw)
        self._quick[index] = quick
        return quick

    def adopt_quick_briefs(self, briefs: dict[int, StepBrief]) -> None:
        """Use quick briefs of this trace's steps built elsewhere (the index process)."""
        for i, brief in briefs.items():
            if 0 <= i < len(self._briefs) and brief.index == i:
                self._quick[i] = brief

    def _cut_parse(self, index: int) -> dict[str, Any] | None:
        """An indexed trace's step parsed with its token capture's lists emptied (see
        :func:`without_capture_lists`), or None when that does not give one object."""
        if self._lazy is None:
            return None
        try:
            light = without_capture_lists(self._lazy.step_bytes(index))
            raw = orjson.loads(light) if light is not None else None
        except (OSError, orjson.JSONDecodeError, IndexError):
            return None
        return raw if isinstance(raw, dict) else None

    def light_step(self, index: int) -> Any:
        """Step ``index`` as the trace holds it, except that for an indexed trace its
        token capture's id, logprob and top-k lists may be empty (parsed without them;
        the full parse when the cut fails). For views that list steps, not their tokens."""
        if self._lazy is None:
            return self._steps[index]
        raw = self._cut_parse(index)
        return raw if raw is not None else self._lazy.parse(index, keep=False)

    def policy_step_indices(self) -> list[int]:
        """Indices of steps whose ``metadata.policy_input`` and ``policy_action`` are both objects."""
        if self._policy_indices is None and self._lazy is not None:
            self._policy_indices = [i for i in range(len(self._steps)) if self.brief(i).is_policy_step]
        if self._policy_indices is None:
            out = []
            for i, raw in enumerate(self._steps):
                if isinstance(raw, dict):
                    md = raw.get("metadata")
                    if isinstance(md, dict) and isinstance(md.get("policy_input"), dict) and isinstance(
                        md.get("policy_action"), dict
                    ):
                        out.append(i)
            self._policy_indices = out
        return list(self._policy_indices)

    def next_policy_step(self, index: int) -> int | None:
        for i in self.policy_step_indices():
            if i > index:
                return i
        return None

    def previous_policy_step(self, index: int) -> int | None:
        found = None
        for i in self.policy_step_indices():
            if i >= index:
                break
            found = i
        return found

    def index_for_step_id(self, step_id: str | None) -> int | None:
        """Map a candidate-style step id ``<episode>:<react|judgment>:<interaction_id>``
        (or ``…:<source_step_index+1>``) to an ``all_steps`` index."""
        if not isinstance(step_id, str) or ":" not in step_id:
            return None
        tail = step_id.rsplit(":", 1)[1]
        if self._lazy is not None:
            for i in range(len(self._steps)):
                if self.brief(i).interaction_id == tail:
                    return i
        for i, raw in enumerate(self._steps if self._lazy is None else ()):
            if isinstance(raw, dict):
                md = raw.get("metadata")
                if isinstance(md, dict) and md.get("interaction_id") == tail:
                    return i
        if tail.isdigit():
            i = int(tail) - 1
            if 0 <= i < len(self._steps):
                return i
        return None

    def step_detail(self, index: int) -> dict[str, Any]:
        """Everything the step-detail view shows, as plain values (raw, not sanitised).

        An indexed trace parses the step from its byte range for this call only: neither
        the parsed step nor its model is kept (their token captures are most of a step;
        the detail holds only the capture's counts)."""
        if self._lazy is None:
            return _step_detail(index, self._steps[index], self.step(index))
        if index < 0:
            index += len(self._steps)
        with self._brief_lock:
            step = self._step_cache.get(index)
        raw = self._lazy.parse(index, keep=False)
        if step is None:
            step, _ = parse_model(TraceStep, raw)
        return _step_detail(index, raw, step if step is not None else TraceStep())

    def token_capture(self, index: int) -> TokenCapture | None:
        return self.step(index).metadata.policy_token_capture


def _step_detail(index: int, raw: Any, step: TraceStep) -> dict[str, Any]:
    """The step-detail values of one raw step and its model (see ``step_detail``)."""
    md = step.metadata
    detail: dict[str, Any] = {
        "index": index,
        "is_object": isinstance(raw, dict),
        "stage": step.stage,
        "round": step.round,
        "action_type": step.action_type,
        "tool_name": step.tool_name,
        "tool_args": step.tool_args,
        "tool_args_pretty": pretty_json_text(step.tool_args) if step.tool_args is not None else "",
        "tool_result": step.tool_result,
        "tool_result_is_json": False,
        "tool_result_pretty": "",
        "thought": step.thought,
        "output": step.output,
        "tokens": step.tokens,
        "is_policy_step": step.is_policy_step,
        "policy_input": md.policy_input,
        "policy_input_pretty": pretty_json_text(md.policy_input) if md.policy_input is not None else "",
        "policy_action": md.policy_action,
        "policy_action_pretty": pretty_json_text(md.policy_action) if md.policy_action is not None else "",
        "context_request_id": md.context_request_id,
        "interaction_id": md.interaction_id,
        "function_call_id": md.function_call_id,
        "psd_role": md.psd_role,
        "psd_suffix_step": md.psd_suffix_step,
        "error_class": md.error_class,
        "rejection_reason": md.rejection_reason,
        "token_capture": None,
        "metadata_keys": sorted(raw.get("metadata", {}).keys()) if isinstance(raw, dict) and isinstance(raw.get("metadata"), dict) else [],
    }
    result = step.tool_result
    if isinstance(result, str):
        stripped = result.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                parsed = orjson.loads(stripped)
            except orjson.JSONDecodeError:
                parsed = None
            else:
                detail["tool_result_is_json"] = True
                detail["tool_result_pretty"] = pretty_json_text(parsed)
        if not detail["tool_result_is_json"]:
            detail["tool_result_pretty"] = result
    elif result is not None:
        detail["tool_result_is_json"] = True
        detail["tool_result_pretty"] = pretty_json_text(result)
    capture = md.policy_token_capture
    if capture is None and isinstance(raw, dict):
        rawmd = raw.get("metadata")
        if isinstance(rawmd, dict) and "policy_token_capture" in rawmd:
            detail["token_capture"] = {"status": "invalid", "missing": ["policy_token_capture"], "is_complete": False}
    if capture is not None:
        detail["token_capture"] = capture.summary()
    return detail


_CAPTURE_KEY = b'"policy_token_capture"'
_NUMBER_LISTS = (b'"prompt_token_ids"', b'"completion_token_ids"', b'"completion_logprobs"')
_TOPK_KEY = b'"completion_topk_by_position"'
_LIST_OPEN = re.compile(rb"\s*:\s*\[")
_WS_BYTES = b" \t\r\n"


def _lists_end(data: bytes, start: int) -> int:
    """Where a list of lists opened just before ``start`` closes: its first ``]`` when it
    is empty, else the first ``]`` followed (after whitespace) by another; -1 if none."""
    j = start
    n = len(data)
    while j < n and data[j] in _WS_BYTES:
        j += 1
    if j < n and data[j] == 0x5D:
        return j
    while True:
        j = data.find(b"]", j)
        if j == -1:
            return -1
        k = j + 1
        while k < n and data[k] in _WS_BYTES:
            k += 1
        if k < n and data[k] == 0x5D:
            return k
        j += 1


_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]")


def _balanced(data: bytes) -> bool:
    """As many ``[`` as ``]`` (one ``translate`` pass keeps only them: faster than two counts)."""
    brackets = data.translate(None, _NOT_BRACKETS)
    return brackets.count(b"[") * 2 == len(brackets)


def without_capture_lists(data: bytes) -> bytes | None:
    """A step's JSON with its token capture's id, logprob and top-k lists emptied (only
    after its ``policy_token_capture`` key, and only where the bytes are what the
    driver writes: a flat list of numbers; a list of lists that closes at the first
    ``]]``, with as many ``[`` as ``]``); ``None`` when there is no capture. The result
    is not trusted blindly: it must parse as one object, and the full parse decides."""
    at = data.find(_CAPTURE_KEY)
    if at == -1:
        return None
    cuts: list[tuple[int, int]] = []
    for key in _NUMBER_LISTS:
        k = data.find(key, at)
        if k == -1:
            continue
        m = _LIST_OPEN.match(data, k + len(key))
        if m is None:
            continue
        close = data.find(b"]", m.end())
        # (``find`` runs at memory speed, ``count`` at a fraction of it)
        if close != -1 and all(data.find(c, m.end(), close) == -1 for c in (b"[", b"{", b'"')):
            cuts.append((m.end(), close))
    k = data.find(_TOPK_KEY, at)
    if k != -1:
        m = _LIST_OPEN.match(data, k + len(_TOPK_KEY))
        if m is not None:
            end = _lists_end(data, m.end())
            if end != -1 and _balanced(data[m.end() - 1 : end + 1]):
                cuts.append((m.end(), end))
    if not cuts:
        return data
    cuts.sort()
    out = []
    pos = 0
    for start, stop in cuts:
        if start < pos:
            return None  # overlapping cuts: not the expected shape
        out.append(data[pos:start])
        pos = stop
    out.append(data[pos:])
    return b"".join(out)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _make_brief(index: int, raw: Any) -> StepBrief:
    brief = StepBrief(index)
    if not isinstance(raw, dict):
        brief.is_object = False
        brief.text_preview = one_line(raw)
        return brief
    brief.stage = _str(raw.get("stage"))
    if brief.stage is None:
        brief.stage = _str(raw.get("stage_name"))
    brief.action_type = _str(raw.get("action_type"))
    brief.tool_name = _str(raw.get("tool_name"))
    brief.args_preview = one_line(raw.get("tool_args"))
    brief.result_preview = one_line(raw.get("tool_result"))
    thought = raw.get("thought")
    output = raw.get("output")
    brief.text_preview = one_line(output if output not in (None, "") else thought)
    brief.is_protocol_rejection = brief.action_type in PROTOCOL_REJECTION_ACTIONS
    md = raw.get("metadata")
    if isinstance(md, dict):
        brief.is_policy_step = isinstance(md.get("policy_input"), dict) and isinstance(md.get("policy_action"), dict)
        capture = md.get("policy_token_capture")
        if isinstance(capture, dict):
            brief.has_token_capture = True
            brief.token_capture_status = _str(capture.get("status"))
        brief.context_request_id = _str(md.get("context_request_id"))
        brief.interaction_id = _str(md.get("interaction_id"))
        brief.psd_role = _str(md.get("psd_role"))
    return brief


def load_trace_bytes(data: bytes, path: str | os.PathLike[str] | None = None) -> tuple[SourceTrace | None, list[Problem]]:
    where = str(path) if path is not None else "<trace>"
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        kind = "truncated" if data.strip() and not data.rstrip().endswith((b"}", b"]")) else "invalid"
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message=f"trace: {kind} JSON: {exc}")]
    if not isinstance(raw, dict):
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message="trace: top level is not a JSON object")]
    return _trace_from_document(raw, path, len(data))


def _trace_from_document(raw: dict[str, Any], path: str | os.PathLike[str] | None, size: int) -> tuple[SourceTrace, list[Problem]]:
    where = str(path) if path is not None else "<trace>"
    trace = SourceTrace(raw, Path(path) if path is not None else None, size_bytes=size)
    problems: list[Problem] = []
    state = raw.get("state")
    if not isinstance(state, dict) and not isinstance(raw.get("all_steps"), list):
        problems.append(Problem(code=ProblemCode.JSON_INVALID, path=where, message="trace: no `state` object"))
    elif isinstance(state, dict) and "all_steps" in state and not isinstance(state.get("all_steps"), list):
        problems.append(Problem(code=ProblemCode.JSON_INVALID, path=where, message="trace: `state.all_steps` is not a list"))
    elif isinstance(state, dict) and "all_steps" not in state and not isinstance(raw.get("all_steps"), list):
        problems.append(Problem(code=ProblemCode.JSON_INVALID, path=where, message="trace: `state.all_steps` is missing"))
    return trace, problems


def _parse_in_chunks(path: Path, *, gz: bool) -> tuple[dict[str, Any], int] | None:
    """A big trace parsed in chunks of steps (lower memory peak, see ``chunked_trace``) and
    its (uncompressed) size, or ``None`` for anything unusual - a bad gzip stream, invalid
    JSON, an odd shape - which the whole-file path then parses and reports precisely."""
    try:
        with open_regular(path) as fh:
            if (fh.read(2) == b"\x1f\x8b") != gz:
                return None
            fh.seek(0)
            if not gz:
                raw = parse_trace_chunked(fh)
                size = fh.tell()
            else:
                with gzip.GzipFile(fileobj=fh) as src:
                    raw = parse_trace_chunked(src, max_bytes=MAX_GZIP_TRACE_BYTES)  # type: ignore[arg-type]  # a GzipFile reads like a binary file
                    size = src.tell()
    except (OSError, EOFError, zlib.error, ValueError, RecursionError, MemoryError):
        return None
    return (raw, size) if isinstance(raw, dict) else None


class ForeignSteps(NamedTuple):
    """A trace's step index built elsewhere (the app's index process; ``None``: the index
    declined the trace) and the quick briefs of the steps around its failure step."""

    step_index: StepIndex | None
    quick_briefs: dict[int, StepBrief]


#: the index of the trace at ``path``, opened here with the given ``os.fstat``, when it was
#: built elsewhere for exactly that file; ``None``: the scan is to run here
ForeignIndex = Callable[[Path, os.stat_result], ForeignSteps | None]


def _index_trace(path: Path, *, gz: bool, spool_dir: Path | None, foreign: ForeignIndex | None = None) -> SourceTrace | None:
    """A big trace indexed (its steps parsed on demand), or ``None`` for anything the
    index does not handle exactly (the chunked / whole-file parse then reports);
    ``foreign``: an index of a plain trace built elsewhere, used when it is of this file."""
    started = time.perf_counter()
    spool: BinaryIO | None = None
    quick: dict[int, StepBrief] = {}
    try:
        with open_regular(path) as fh:
            if (fh.read(2) == b"\x1f\x8b") != gz:
                return None
            fh.seek(0)
            if not gz:
                found = foreign(path, os.fstat(fh.fileno())) if foreign is not None else None
                index, quick = (index_steps(fh), {}) if found is None else found
            else:
                if spool_dir is not None:
                    spool_dir.mkdir(parents=True, exist_ok=True)
                # unnamed where the OS allows (O_TMPFILE): nothing is left behind
                spool = tempfile.TemporaryFile(dir=spool_dir, prefix="eviscene-trace-", suffix=".json")
                with gzip.GzipFile(fileobj=fh) as src:
                    index = index_steps(src, sink=spool, max_bytes=MAX_GZIP_TRACE_BYTES)  # type: ignore[arg-type]  # a GzipFile reads like a binary file
                spool.flush()
    except (OSError, EOFError, zlib.error, ValueError, RecursionError, MemoryError):
        index = None
    if index is None:
        if spool is not None:
            spool.close()
        return None
    steps = LazySteps(index, path, spool=spool)
    raw = index.skeleton
    if index.steps_at == "state":
        raw["state"]["all_steps"] = steps
    else:
        raw["all_steps"] = steps
    trace = SourceTrace(raw, path, size_bytes=index.size, steps=steps, gzip=gz, index_seconds=time.perf_counter() - started)
    trace.adopt_quick_briefs(quick)
    return trace


def quick_briefs(index: StepIndex, path: Path, indices: Iterable[int]) -> dict[int, StepBrief]:
    """The quick briefs (:meth:`SourceTrace.quick_brief`) of some steps of the plain trace
    at ``path`` indexed as ``index`` (for the app's index process, which sends them with
    the index)."""
    steps = LazySteps(index, path, cache_size=0)
    try:
        trace = SourceTrace({"all_steps": steps}, path, steps=steps)
        return {i: trace.quick_brief(i) for i in indices if 0 <= i < len(steps)}
    finally:
        steps.close()


def load_trace(
    path: str | os.PathLike[str], *, lazy: bool | None = None, spool_dir: str | os.PathLike[str] | None = None,
    foreign: ForeignIndex | None = None,
) -> tuple[SourceTrace | None, list[Problem]]:
    """Read and parse a trace once. Never raises. ``.gz`` files are decompressed.

    Big files (``LAZY_MIN_BYTES``, or ``lazy=True``) are indexed: one scan of the bytes,
    steps parsed on demand (``step_index``); a gzip one is decompressed once into an
    unnamed temporary file in ``spool_dir`` (the app's work directory; the system's
    temporary directory when ``None``). ``lazy=False``, or a file the index declines,
    takes the whole-file path: big files parsed in chunks of steps (same result, about a
    third of the peak memory, see ``chunked_trace``), others with one ``orjson.loads``."""
    p = Path(path)
    where = str(p)
    try:
        st = p.stat()
    except FileNotFoundError:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message="trace file not found")]
    except OSError as exc:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message=f"trace: cannot open: {exc.strerror}")]
    if not stat.S_ISREG(st.st_mode):
        return None, [not_regular(where, st.st_mode).problem()]
    if st.st_size > LIMITS["trace"]:
        return None, [too_large(where, st.st_size, LIMITS["trace"]).problem()]
    gz = where.endswith(".gz")
    if lazy or (lazy is None and st.st_size >= (LAZY_MIN_GZ_BYTES if gz else LAZY_MIN_BYTES)):
        indexed = _index_trace(p, gz=gz, spool_dir=Path(spool_dir) if spool_dir is not None else None, foreign=foreign)
        if indexed is not None:
            return indexed, []
    if st.st_size >= (CHUNKED_MIN_GZ_BYTES if gz else CHUNKED_MIN_BYTES) and switches.on("chunked_trace"):
        parsed = _parse_in_chunks(p, gz=gz)
        if parsed is not None:
            return _trace_from_document(parsed[0], p, parsed[1])
    try:
        data = read_regular(p, limit=LIMITS["trace"])
    except ReadRefused as exc:
        return None, [exc.problem()]
    except FileNotFoundError:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message="trace file not found")]
    except OSError as exc:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message=f"trace: cannot read: {exc.strerror}")]
    if where.endswith(".gz") or data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
                data = stream.read(MAX_GZIP_TRACE_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message=f"trace: bad gzip: {exc}")]
        if len(data) > MAX_GZIP_TRACE_BYTES:
            return None, [Problem(code=ProblemCode.FILE_TOO_LARGE, path=where, message="trace: uncompressed size over 2 GiB; not read")]
    return load_trace_bytes(data, p)


__all__ = [
    "ForeignIndex",
    "ForeignSteps",
    "LazySteps",
    "SourceTrace",
    "StepBrief",
    "load_trace",
    "load_trace_bytes",
    "one_line",
    "pretty_json_text",
    "quick_briefs",
]
