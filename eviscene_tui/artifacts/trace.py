"""Source traces and teacher episodes (psd-run-format §3), loaded fast and lazily.

``load_trace(path)`` reads the file once and parses it once with orjson. Nothing is
validated up front: :class:`SourceTrace` keeps the raw dict and builds a
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
import io
import zlib
import os
import stat
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.chunked_trace import parse_trace_chunked
from eviscene_tui.artifacts.jsonio import canonical_sha256, sha256_file
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
MAX_GZIP_TRACE_BYTES = 1 << 31
CHUNKED_MIN_BYTES = 16 << 20  # plain traces this big are parsed in chunks of steps
CHUNKED_MIN_GZ_BYTES = 2 << 20  # and gzip traces this big (compressed)


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

    def __init__(self, raw: dict[str, Any], path: Path | None = None, *, size_bytes: int | None = None) -> None:
        self.raw = raw
        self.path = path
        self.size_bytes = size_bytes
        state = raw.get("state")
        self._state: dict[str, Any] = state if isinstance(state, dict) else {}
        steps = self._state.get("all_steps")
        if not isinstance(steps, list):
            steps = raw.get("all_steps") if isinstance(raw.get("all_steps"), list) else []
        self._steps: list[Any] = steps
        self._step_cache: OrderedDict[int, TraceStep] = OrderedDict()
        self._briefs: list[StepBrief | None] = [None] * len(steps)
        self._policy_indices: list[int] | None = None
        self._canonical: str | None = None
        self._file_sha: str | None = None

    # ---------------------------------------------------------------- identity
    @property
    def state(self) -> dict[str, Any]:
        return self._state

    @property
    def raw_steps(self) -> list[Any]:
        return self._steps

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

    @property
    def psd_repair(self) -> dict[str, Any] | None:
        value = self.raw.get("psd_repair")
        return value if isinstance(value, dict) else None

    # ---------------------------------------------------------------- hashes
    def canonical_sha256(self) -> str:
        """Canonical JSON sha of the whole trace (§6); computed once."""
        if self._canonical is None:
            self._canonical = canonical_sha256(self.raw)
        return self._canonical

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
        cached = self._step_cache.get(index)
        if cached is not None:
            self._step_cache.move_to_end(index)
            return cached
        raw = self._steps[index]
        model, _ = parse_model(TraceStep, raw)
        if model is None:
            model = TraceStep()
        self._step_cache[index] = model
        if len(self._step_cache) > _STEP_CACHE_SIZE:
            self._step_cache.popitem(last=False)
        return model

    def brief(self, index: int) -> StepBrief:
        if index < 0:
            index += len(self._steps)
        if not 0 <= index < len(self._steps):
            raise IndexError(index)
        cached = self._briefs[index]
        if cached is None:
            cached = _make_brief(index, self._steps[index])
            self._briefs[index] = cached
        return cached

    def policy_step_indices(self) -> list[int]:
        """Indices of steps whose ``metadata.policy_input`` and ``policy_action`` are both objects."""
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
        for i, raw in enumerate(self._steps):
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
        """Everything the step-detail view shows, as plain values (raw, not sanitised)."""
        raw = self._steps[index]
        step = self.step(index)
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

    def token_capture(self, index: int) -> TokenCapture | None:
        return self.step(index).metadata.policy_token_capture


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
        with open(path, "rb") as fh:
            if (fh.read(2) == b"\x1f\x8b") != gz:
                return None
            fh.seek(0)
            if not gz:
                raw = parse_trace_chunked(fh)
                size = fh.tell()
            else:
                with gzip.GzipFile(fileobj=fh) as src:
                    raw = parse_trace_chunked(src, max_bytes=MAX_GZIP_TRACE_BYTES)  # type: ignore[arg-type]
                    size = src.tell()
    except (OSError, EOFError, zlib.error, ValueError, RecursionError, MemoryError):
        return None
    return (raw, size) if isinstance(raw, dict) else None


def load_trace(path: str | os.PathLike[str]) -> tuple[SourceTrace | None, list[Problem]]:
    """Read and parse a trace once. Never raises. ``.gz`` files are decompressed; big
    files are parsed in chunks of steps (same result, about a third of the peak memory,
    see ``chunked_trace``)."""
    p = Path(path)
    where = str(p)
    try:
        st = p.stat()
    except FileNotFoundError:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message="trace file not found")]
    except OSError as exc:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message=f"trace: cannot open: {exc.strerror}")]
    if stat.S_ISDIR(st.st_mode):
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message="trace: expected a file, found a directory")]
    if not stat.S_ISREG(st.st_mode):
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message="trace: not a regular file")]
    gz = where.endswith(".gz")
    if st.st_size >= (CHUNKED_MIN_GZ_BYTES if gz else CHUNKED_MIN_BYTES):
        parsed = _parse_in_chunks(p, gz=gz)
        if parsed is not None:
            return _trace_from_document(parsed[0], p, parsed[1])
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message="trace file not found")]
    except IsADirectoryError:
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message="trace: expected a file, found a directory")]
    except OSError as exc:
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message=f"trace: cannot read: {exc.strerror}")]
    if where.endswith(".gz") or data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
                data = gz.read(MAX_GZIP_TRACE_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message=f"trace: bad gzip: {exc}")]
        if len(data) > MAX_GZIP_TRACE_BYTES:
            return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message="trace: uncompressed size over 2 GiB")]
    return load_trace_bytes(data, p)


__all__ = [
    "SourceTrace",
    "StepBrief",
    "load_trace",
    "load_trace_bytes",
    "one_line",
    "pretty_json_text",
]
