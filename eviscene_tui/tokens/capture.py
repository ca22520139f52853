"""One token capture ready for the inspector: ids, prompt/completion boundary,
logprobs, top-k, status, ``missing`` codes and accounting checks. Textual-free.

Inputs are the artifact layer's models or plain dicts (duck-typed), so the same
code serves a source step's ``policy_token_capture``, an attempt's id fields, and
a recorded continuation from the app's work directory.
"""

from __future__ import annotations

import orjson

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from eviscene_tui.artifacts.media import MediaReport, PsdMedia
from eviscene_tui.artifacts.problems import Problem
from eviscene_tui.tokens.diff import AlignOp, PromptDiff

CaptureKind = Literal["step", "prompt", "completion", "continuation"]
CheckLevel = Literal["ok", "warn", "fail", "info"]

# logprob buckets: upper probability bounds, highest first
LOGPROB_BUCKETS: tuple[tuple[float, str], ...] = (
    (math.log(0.9), "high"),  # p >= 0.9
    (math.log(0.5), "mid"),  # p >= 0.5
    (math.log(0.1), "low"),  # p >= 0.1
    (-math.inf, "vlow"),  # p < 0.1
)


def prob_of(lp: float | None) -> float | None:
    """exp(logprob) for a valid logprob (finite, <= 0); None otherwise."""
    if lp is None or isinstance(lp, bool) or not isinstance(lp, (int, float)) or not math.isfinite(lp) or lp > 0:
        return None
    return math.exp(lp)


def logprob_bucket(lp: float | None) -> str | None:
    if lp is None or not isinstance(lp, (int, float)) or math.isnan(lp):
        return None
    for bound, name in LOGPROB_BUCKETS:
        if lp >= bound:
            return name
    return "vlow"


@dataclass(frozen=True)
class TopKEntry:
    token_id: int | None
    probability: float | None
    logprob: float | None = None
    token: str | None = None


@dataclass(frozen=True)
class Check:
    level: CheckLevel
    message: str


@dataclass(repr=False)
class CaptureData:
    key: str
    label: str
    kind: CaptureKind
    ids: list[int]
    completion_start: int | None = None  # offset of the first completion id (None: no completion part)
    logprobs: list[float | None] | None = None  # per completion position
    topk: list[list[TopKEntry]] | None = None  # per completion position
    topk_k: int | None = None
    topk_semantics: str = ""
    status: str | None = None
    missing: list[str] = field(default_factory=list)
    logprob_semantics: str | None = None
    usage: dict[str, Any] | None = None
    checks: list[Check] = field(default_factory=list)
    # student vs teacher
    student_ids: list[int] | None = None
    teacher_ids: list[int] | None = None
    prompt_diff: PromptDiff | None = None
    # teacher completion vs source step completion
    source_completion_ids: list[int] | None = None
    teacher_completion_ids: list[int] | None = None
    alignment: list[AlignOp] | None = None
    alignment_method: str | None = None
    # media
    media: PsdMedia | None = None
    media_report: MediaReport | None = None
    media_problems: list[Problem] = field(default_factory=list)
    # information, not a problem: e.g. image-pad runs in a legacy record without psd_media
    media_note: str | None = None
    # media-binding problems the case's integrity check found about this capture's run that
    # its own verification did not (set by the token screen): (code, path, message)
    media_drift: list[tuple[str, str, str]] = field(default_factory=list)
    run_dir: str | None = None
    # a span to highlight (e.g. the hint insertion in a teacher prompt), id offsets, end exclusive
    highlight: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    # a teacher prompt's hint: its span is found from this text (tokens/hintspan.py), once
    # the decoder is known; ids [0, hint_prompt_len) are the hinted prompt
    hint_text: str | None = None
    hint_prompt_len: int | None = None
    round_index: int | None = None
    # were logprobs asked for? (None: not known, e.g. an archived capture)
    logprobs_requested: bool | None = None

    @property
    def hinted_prompt(self) -> bool:
        """Is this capture a hinted (teacher) prompt whose hint span should be located?"""
        return self.hint_prompt_len is not None

    def __repr__(self) -> str:
        # short: the default repr would format every id of a capture (e.g. in a worker's description)
        return f"CaptureData(key={self.key!r}, kind={self.kind!r}, ids={len(self.ids):,})"

    def completion_index(self, offset: int) -> int | None:
        if self.completion_start is None or offset < self.completion_start:
            return None
        return offset - self.completion_start

    def logprob_at(self, offset: int) -> float | None:
        ci = self.completion_index(offset)
        if ci is None or self.logprobs is None or ci >= len(self.logprobs):
            return None
        return self.logprobs[ci]

    def topk_at(self, offset: int) -> list[TopKEntry] | None:
        ci = self.completion_index(offset)
        if ci is None or self.topk is None or ci >= len(self.topk):
            return None
        return self.topk[ci]


def field_of(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` for a mapping, ``obj.key`` for a model; ``default`` when missing or None obj."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _int_list(value: Any) -> list[int] | None:
    """``value`` when it is a list of ints (not copied: a capture's id list is parsed once),
    a list of it for a tuple of ints, None otherwise (bools are not ids)."""
    if not isinstance(value, (list, tuple)):
        return None
    if _only_ints(value):
        return value if isinstance(value, list) else list(value)
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int):
            return None
        out.append(v)
    return out


#: what orjson writes for a list of ints, besides its brackets
_INT_LIST_BYTES = b"0123456789-,"


def _only_ints(value: list[Any] | tuple[Any, ...]) -> bool:
    """Every item is an int and none a bool, at C speed: orjson writes a list of ints as
    digits, minus signs and commas between its two brackets, and anything else adds other
    bytes (a float ``.`` or ``e``, a bool ``true``, None ``null``, a string ``"``, a nested
    list or object its brackets). It runs in the token view's first paint, where a Python
    loop over the items (``set(map(type, ...))``) was a visible part of the wait. An int beyond 64 bits, or an item orjson
    cannot write, takes the item-by-item check."""
    try:
        written = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return all(type(v) is int for v in value)
    return written.translate(None, _INT_LIST_BYTES) == b"[]"


def normalise_logprobs(value: Any) -> list[float | None] | None:
    """Floats, or ``{logprob: x}`` objects, or None entries."""
    if not isinstance(value, (list, tuple)):
        return None
    out: list[float | None] = []
    for v in value:
        if isinstance(v, bool):
            out.append(None)
        elif isinstance(v, (int, float)):
            out.append(float(v) if math.isfinite(v) or v == -math.inf else None)
        elif isinstance(v, Mapping) and isinstance(v.get("logprob"), (int, float)) and not isinstance(v.get("logprob"), bool):
            f = float(v["logprob"])
            out.append(f if math.isfinite(f) or f == -math.inf else None)
        else:
            out.append(None)
    return out


def _number(value: Any) -> float | None:
    """A JSON number as a float (booleans are not numbers here)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _topk_entry(e: Mapping[str, Any]) -> TopKEntry:
    """One ``{"token_id", "logprob", "probability", "token"}`` alternative."""
    tid = e.get("token_id")
    token = e.get("token")
    return TopKEntry(
        token_id=tid if isinstance(tid, int) and not isinstance(tid, bool) else None,
        probability=_number(e.get("probability")),
        logprob=_number(e.get("logprob")),
        token=token if isinstance(token, str) else None,
    )


def _topk_row(row: Any) -> list[TopKEntry]:
    """The alternatives of one position, most probable first: a list of entries, or the
    ``{"<id>": prob}`` form."""
    entries: list[TopKEntry] = []
    if isinstance(row, (list, tuple)):
        entries = [_topk_entry(e) for e in row if isinstance(e, Mapping)]
    elif isinstance(row, Mapping):
        for k, v in row.items():
            try:
                tid = int(k)
            except (TypeError, ValueError):
                continue
            if isinstance(v, (int, float)):
                entries.append(TopKEntry(token_id=tid, probability=float(v)))
    entries.sort(key=lambda e: -(e.probability if e.probability is not None and math.isfinite(e.probability) else (prob_of(e.logprob) or 0.0)))
    return entries


def normalise_topk(value: Any) -> list[list[TopKEntry]] | None:
    if not isinstance(value, (list, tuple)):
        return None
    return [_topk_row(row) for row in value]


def from_policy_capture(
    capture: Any, *, key: str, label: str, usage: Mapping[str, Any] | None = None
) -> CaptureData:
    """A ``policy_token_capture`` (§3.3): prompt ids then completion ids, with logprobs and top-k."""
    prompt = _int_list(field_of(capture, "prompt_token_ids"))
    completion = _int_list(field_of(capture, "completion_token_ids"))
    ids = (prompt or []) + (completion or [])
    missing_raw = field_of(capture, "missing") or []
    data = CaptureData(
        key=key,
        label=label,
        kind="step",
        ids=ids,
        completion_start=len(prompt or []) if completion is not None else None,
        logprobs=normalise_logprobs(field_of(capture, "completion_logprobs")),
        topk=normalise_topk(field_of(capture, "completion_topk_by_position")),
        topk_k=field_of(capture, "topk") if isinstance(field_of(capture, "topk"), int) else None,
        status=field_of(capture, "status") if isinstance(field_of(capture, "status"), str) else None,
        missing=[str(m) for m in missing_raw] if isinstance(missing_raw, (list, tuple)) else [str(missing_raw)],
        logprob_semantics=field_of(capture, "teacher_logprob_semantics"),
        usage=dict(usage) if isinstance(usage, Mapping) else None,
    )
    data.topk_semantics = "probabilities renormalised over the k returned logprobs (as stored)"
    if prompt is None:
        data.notes.append("prompt_token_ids absent")
    if completion is None:
        data.notes.append("completion_token_ids absent")
    data.checks = capture_checks(data, prompt_len=len(prompt) if prompt is not None else None,
                                 completion_len=len(completion) if completion is not None else None)
    return data


def capture_checks(data: CaptureData, *, prompt_len: int | None, completion_len: int | None) -> list[Check]:
    """Status, ``missing`` codes, logprob/top-k lengths, and usage accounting."""
    checks: list[Check] = []
    if data.status == "complete" and not data.missing:
        checks.append(Check("ok", "capture status complete, nothing missing"))
    elif data.status is None:
        checks.append(Check("warn", "capture has no status"))
    else:
        codes = ", ".join(data.missing) if data.missing else "none listed"
        checks.append(Check("fail" if data.status != "complete" else "warn", f"capture status {data.status}; missing: {codes}"))
    if completion_len is not None:
        if data.logprobs is not None:
            if len(data.logprobs) == completion_len:
                checks.append(Check("ok", f"{len(data.logprobs)} logprobs for {completion_len} completion ids"))
            else:
                checks.append(Check("fail", f"completion_logprob_length_mismatch: {len(data.logprobs)} logprobs for {completion_len} completion ids"))
        if data.topk is not None and data.topk_k:
            if len(data.topk) == completion_len:
                checks.append(Check("ok", f"top-{data.topk_k} for every completion position"))
            else:
                checks.append(Check("fail", f"completion_topk_length_mismatch: {len(data.topk)} top-k rows for {completion_len} completion ids"))
    usage = data.usage or {}
    ct = usage.get("completion_tokens")
    pt = usage.get("prompt_tokens")
    if isinstance(ct, int) and completion_len is not None:
        if ct == completion_len:
            checks.append(Check("ok", f"accounting: {completion_len} completion ids = usage.completion_tokens"))
        else:
            checks.append(Check("fail", f"accounting: {completion_len} completion ids but usage.completion_tokens = {ct}"))
    elif completion_len is not None:
        checks.append(Check("info", "accounting: no usage recorded for this capture"))
    if isinstance(pt, int) and prompt_len is not None:
        if pt == prompt_len:
            checks.append(Check("ok", f"accounting: {prompt_len} prompt ids = usage.prompt_tokens"))
        else:
            checks.append(Check("fail", f"accounting: {prompt_len} prompt ids but usage.prompt_tokens = {pt}"))
    return checks


def usage_from_step_tokens(tokens: Any) -> dict[str, Any] | None:
    """A step's ``tokens`` field, when it carries prompt/completion counts."""
    if not isinstance(tokens, Mapping):
        return None
    out: dict[str, Any] = {}
    # only the explicit usage names: a step's ``tokens.completion`` may include tool tokens
    for key in ("prompt_tokens", "completion_tokens"):
        v = tokens.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            out[key] = v
    return out or None


def from_stream(
    prompt_token_ids: Sequence[int] | None,
    completion_token_ids: Sequence[int],
    *,
    logprobs: Sequence[Any] | None = None,
    usage: Mapping[str, Any] | None = None,
    status: str | None = None,
    key: str = "live",
    label: str = "live continuation",
) -> CaptureData:
    """A capture from a live stream (the policy client's accumulated ids).

    ``logprobs`` are chat ``logprobs.content`` entries as dicts
    (``{token, logprob, token_id, top: [{token, logprob, token_id}]}``), as the
    recorder writes them; top-k probabilities are ``exp(logprob)`` (not renormalised).
    """
    lps = None
    top = None
    if logprobs is not None:
        lps = [e.get("logprob") if isinstance(e, Mapping) else e for e in logprobs]
        rows = []
        for e in logprobs:
            row = []
            for t in (e.get("top") or []) if isinstance(e, Mapping) else []:
                if isinstance(t, Mapping) and prob_of(t.get("logprob")) is not None:
                    row.append({"token_id": t.get("token_id"), "probability": prob_of(t["logprob"]),
                                "logprob": t["logprob"], "token": t.get("token")})
            rows.append(row)
        top = rows if any(rows) else None
    cap = {
        "status": status,
        "prompt_token_ids": list(prompt_token_ids) if prompt_token_ids is not None else None,
        "completion_token_ids": list(completion_token_ids),
        "completion_logprobs": lps,
        "completion_topk_by_position": top,
        "missing": [],
    }
    data = from_policy_capture(cap, key=key, label=label, usage=usage)
    data.kind = "continuation"
    if top is not None:
        data.topk_semantics = "top logprobs as returned by the server (probability = exp(logprob))"
    return data
