"""Which token captures a case holds, and loading one into :class:`CaptureData`.

Capture keys (the ``source`` argument of the token screen):

- ``step:<i>``: ``state.all_steps[i].metadata.policy_token_capture`` of the source trace;
- ``attempt:<round>:<field>`` (first attempt of the round) or ``attempt:<round>.<k>:<field>``
  with ``<field>`` one of ``student_prompt_ids``, ``teacher_prompt_ids``, ``completion_ids``,
  ``repair_rollout_token_capture``;
- ``recorded:<path relative to the work dir>``: a continuation recorded by the app
  (any JSON object with prompt / completion token ids).

Works on a :class:`CaptureCase` (a ``CaseBundle``, or the synthetic cases of tests and
benchmarks: ``case.trace()``, ``case.rounds[i].attempts``, ``.dir``), or None; a missing or
unreadable part (no trace, a round without attempts) is simply absent, so a partial case
still lists what it has.
Textual-free; called from workers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from eviscene_tui.artifacts.fileio import ReadRefused, read_regular
from eviscene_tui.artifacts.media import image_pad_runs, pad_id_for, parse_psd_media, verify_media
from eviscene_tui.tokens.capture import (
    CaptureData,
    _int_list,
    Check,
    capture_checks,
    field_of,
    from_policy_capture,
    normalise_logprobs,
    normalise_topk,
    usage_from_step_tokens,
)
from eviscene_tui.tokens.decode import DecodeSource, TokenDecoder
from eviscene_tui.tokens.diff import align, prompt_diff
from eviscene_tui.tokens.hintspan import HintSpan, hint_span
from eviscene_tui.tokens.capture import prob_of

if TYPE_CHECKING:
    from eviscene_tui.artifacts.models import AttemptRecord
    from eviscene_tui.artifacts.problems import Problem
    from eviscene_tui.artifacts.trace import SourceTrace

ATTEMPT_FIELDS = ("student_prompt_ids", "teacher_prompt_ids", "completion_ids", "repair_rollout_token_capture")
FIELD_LABELS = {
    "student_prompt_ids": "student prompt",
    "teacher_prompt_ids": "teacher prompt (hinted)",
    "completion_ids": "teacher completion",
    "repair_rollout_token_capture": "teacher rollout capture",
}
_KEY_RE = re.compile(r"^attempt:(\d+)(?:\.(\d+))?:([a-z_]+)$")
MAX_RECORDED_FILES = 500
MAX_RECORDED_BYTES = 256 << 20


@dataclass(frozen=True)
class CaptureRef:
    key: str
    label: str
    group: str  # "source step" | "attempt" | "recorded"
    size: int | None  # number of ids, when cheap to know


class CaptureRound(Protocol):
    """What the capture sources read of one run directory (``artifacts.case.RoundBundle``)."""

    @property
    def index(self) -> int: ...

    @property
    def dir(self) -> Path: ...

    @property
    def attempts(self) -> Sequence[AttemptRecord] | None: ...  # None: its attempts file is unreadable or absent


class CaptureCase(Protocol):
    """What the capture sources read of a case: ``artifacts.case.CaseBundle``, or a
    stand-in holding only these (``scaffold.synthetic_capture.SyntheticCase``)."""

    @property
    def root(self) -> Path | None: ...

    @property
    def case_id(self) -> str | None: ...

    @property
    def rounds(self) -> Sequence[CaptureRound]: ...

    @property
    def attempts(self) -> Sequence[AttemptRecord]: ...  # the case-level attempts (a search root's)

    def trace(self) -> tuple[SourceTrace | None, list[Problem]]: ...


def _trace(case: CaptureCase | None) -> SourceTrace | None:
    return case.trace()[0] if case is not None else None


def _steps(case: CaptureCase | None) -> Sequence[Any]:
    """The source trace's raw steps (none without a case or a readable trace)."""
    trace = _trace(case)
    return trace.raw_steps if trace is not None else ()


def _attempt_groups(case: CaptureCase | None) -> list[tuple[int, Path | None, list[AttemptRecord]]]:
    """(round index, run dir, attempts) per round; falls back to case-level attempts."""
    out: list[tuple[int, Path | None, list[AttemptRecord]]] = []
    if case is None:
        return out
    for r in case.rounds:
        if r.attempts:
            out.append((r.index, r.dir, list(r.attempts)))
    if not out and case.attempts:
        out.append((0, case.root, list(case.attempts)))
    return out


def _raw_capture(raw_step: Any) -> Any:
    if not isinstance(raw_step, Mapping):
        return None
    meta = raw_step.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    cap = meta.get("policy_token_capture")
    return cap if isinstance(cap, Mapping) else None


def _len(value: Any) -> int | None:
    return len(value) if isinstance(value, (list, tuple)) else None


WorkDirs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def _workdirs(workdir: WorkDirs | None) -> list[Path]:
    """One work directory, or the several that hold a case's records (the first: where the
    app writes; journal.records.read_workdirs)."""
    if workdir is None:
        return []
    if isinstance(workdir, (str, os.PathLike)):
        return [Path(workdir)]
    return [Path(w) for w in workdir]


def enumerate_captures(case: CaptureCase | None, *, workdir: WorkDirs | None = None) -> list[CaptureRef]:
    refs: list[CaptureRef] = []
    for i, raw in enumerate(_steps(case)):
        cap = _raw_capture(raw)
        if cap is None:
            continue
        n = (_len(cap.get("prompt_token_ids")) or 0) + (_len(cap.get("completion_token_ids")) or 0)
        stage = raw.get("stage") or raw.get("stage_name") or "?"
        status = cap.get("status") or "?"
        refs.append(CaptureRef(f"step:{i}", f"source step {i} ({stage}, {status})", "source step", n))
    for rnd, _dir, atts in _attempt_groups(case):
        for k, att in enumerate(atts):
            for field in ATTEMPT_FIELDS:
                value = field_of(att, field)
                if value is None:
                    continue
                size: int | None = _len(value)
                if field == "repair_rollout_token_capture":
                    size = (_len(field_of(value, "prompt_token_ids")) or 0) + (_len(field_of(value, "completion_token_ids")) or 0)
                key = f"attempt:{rnd}:{field}" if k == 0 else f"attempt:{rnd}.{k}:{field}"
                hint_no = "" if len(atts) == 1 else f" attempt {k}"
                refs.append(CaptureRef(key, f"round {rnd}{hint_no}: {FIELD_LABELS[field]}", "attempt", size))
    root = case.root if case is not None else None
    case_id = case.case_id if case is not None else None
    for n, wd in enumerate(_workdirs(workdir)):
        refs.extend(recorded_captures(
            wd,
            case_root=str(root) if root is not None else None,
            case_id=case_id,
            case_key=Path(root).name if root is not None else None,
            absolute=n > 0,  # records found in another work directory are named by their path
        ))
    return refs


# --------------------------------------------------------------------------- recorded continuations
def _recorded_ids(doc: Any) -> tuple[list[int] | None, list[int] | None]:
    if not isinstance(doc, Mapping):
        return None, None
    prompt = doc.get("prompt_token_ids")
    completion = doc.get("completion_token_ids", doc.get("completion_ids", doc.get("token_ids")))
    for sub in ("tokens", "token_ids_record", "result"):
        if (prompt is None or completion is None) and isinstance(doc.get(sub), Mapping):
            inner = doc[sub]
            prompt = prompt if prompt is not None else inner.get("prompt_token_ids")
            completion = completion if completion is not None else inner.get(
                "completion_token_ids", inner.get("completion_ids", inner.get("token_ids"))
            )
    ok = lambda v: isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)  # noqa: E731 - a one-line check
    return (prompt if ok(prompt) else None), (completion if ok(completion) else None)


def _record_case(doc: Any) -> Mapping[str, Any]:
    case = doc.get("case") if isinstance(doc, Mapping) else None
    return case if isinstance(case, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def record_is_of_case(doc: Any, *, case_root: str, case_id: str | None = None, case_key: str | None = None) -> bool:
    """Whether a recorded continuation names this case. Its recorded ``case_root`` is the
    case's root; or, once the tree was moved (the recorded root is no longer a folder),
    both its ``case_id`` and ``case_key`` (the case folder's name) are this case's. A record
    that names no case belongs to none: it is never shown as another case's capture."""
    ref = _record_case(doc)
    other = _text(ref.get("case_root"))
    if other is not None and os.path.normpath(other) == os.path.normpath(case_root):
        return True
    if other is not None and os.path.isdir(other):
        return False  # another case that still exists where it was recorded
    rid, rkey = _text(ref.get("case_id")), _text(ref.get("case_key"))
    return rid is not None and rkey is not None and rid == case_id and rkey == case_key


def recorded_captures(
    workdir: str | os.PathLike[str],
    *,
    case_root: str | None = None,
    case_id: str | None = None,
    case_key: str | None = None,
    absolute: bool = False,
) -> list[CaptureRef]:
    """Continuations the app recorded in its work directory (never the evidence root).
    ``absolute``: name them ``recorded:<absolute path>`` (a work directory other than the
    app's own), else ``recorded:<path in the work directory>``.

    With ``case_root``, only the records of that case (:func:`record_is_of_case`);
    without, every record.
    """
    root = Path(workdir)
    refs: list[CaptureRef] = []
    if not root.is_dir():
        return refs
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in sorted(dirnames) if d not in ("supervised",) and not d.startswith(".")]
        for name in sorted(filenames):
            if not name.endswith(".json") or seen >= MAX_RECORDED_FILES:
                continue
            path = Path(dirpath) / name
            try:
                doc = orjson.loads(read_regular(path, limit=MAX_RECORDED_BYTES))
            except (OSError, orjson.JSONDecodeError):  # not a record (too big, not a regular file, not JSON): skipped
                continue
            prompt, completion = _recorded_ids(doc)
            if prompt is None and completion is None:
                continue
            if case_root is not None and not record_is_of_case(doc, case_root=case_root, case_id=case_id, case_key=case_key):
                continue
            seen += 1
            rel = str(path.resolve()) if absolute else path.relative_to(root).as_posix()
            status = doc.get("status") if isinstance(doc, Mapping) else None
            n = (len(prompt) if prompt else 0) + (len(completion) if completion else 0)
            refs.append(CaptureRef(f"recorded:{rel}", f"recorded continuation {rel} ({status or '?'})", "recorded", n))
    return refs


def source_step_prompt_ids(case: CaptureCase | None, step_index: int | None) -> list[int] | None:
    """The student prompt: ``prompt_token_ids`` of source step ``step_index``'s
    ``policy_token_capture`` (None when the case, step or capture is missing). Reads the trace."""
    if case is None or not isinstance(step_index, int) or isinstance(step_index, bool):
        return None
    steps = _steps(case)
    if not 0 <= step_index < len(steps):
        return None
    cap = _raw_capture(steps[step_index])
    return _int(cap.get("prompt_token_ids")) if cap is not None else None


# --------------------------------------------------------------------------- loading
class CaptureError(Exception):
    """A capture key that does not name anything in this case (message is user-facing)."""


def _find_attempt(case: CaptureCase | None, rnd: int, k: int) -> tuple[Any, Path | None]:
    for r, run_dir, atts in _attempt_groups(case):
        if r == rnd:
            if k >= len(atts):
                raise CaptureError(f"round {rnd} has {len(atts)} attempt(s); there is no attempt {k}")
            return atts[k], Path(run_dir) if run_dir is not None else None
    raise CaptureError(f"no attempts recorded for round {rnd}")


def _source_step_capture(case: CaptureCase | None, att: Any) -> tuple[int | None, Any]:
    site = field_of(att, "repair_site")
    idx = field_of(site, "source_step_index")
    if not isinstance(idx, int):
        return None, None
    steps = _steps(case)
    if not 0 <= idx < len(steps):
        return idx, None
    return idx, _raw_capture(steps[idx])


def load_capture(case: CaptureCase | None, key: str, *, workdir: WorkDirs | None = None) -> CaptureData:
    """Load one capture by key. Raises :class:`CaptureError` with a clear message."""
    if key.startswith("step:"):
        return _load_step(case, key)
    if key.startswith("recorded:"):
        return _load_recorded(case, key, workdir)
    return _load_attempt(case, key)


def _load_step(case: CaptureCase | None, key: str) -> CaptureData:
    """``step:<i>``: the source trace step's ``policy_token_capture``."""
    try:
        idx = int(key.split(":", 1)[1])
    except ValueError:
        raise CaptureError(f"bad capture name {key!r}: expected step:<index>") from None
    trace = _trace(case)
    if trace is None:
        raise CaptureError("this case has no readable source trace")
    steps = trace.raw_steps
    if not 0 <= idx < len(steps):
        raise CaptureError(f"the source trace has {len(steps)} steps; there is no step {idx}")
    raw = steps[idx]
    cap = _raw_capture(raw)
    if cap is None:
        raise CaptureError(f"source step {idx} has no metadata.policy_token_capture")
    usage = usage_from_step_tokens(raw.get("tokens")) if isinstance(raw, Mapping) else None
    stage = (raw.get("stage") or raw.get("stage_name")) if isinstance(raw, Mapping) else None
    return from_policy_capture(cap, key=key, label=f"source step {idx} ({stage or '?'}) policy_token_capture", usage=usage)


def _load_recorded(case: CaptureCase | None, key: str, workdir: WorkDirs | None) -> CaptureData:
    """``recorded:<path>``: a continuation the app recorded in a work directory (an
    absolute path: in one of the work directories given, else relative to the first)."""
    roots = [w.resolve() for w in _workdirs(workdir)]
    if not roots:
        raise CaptureError("no work directory to read recorded continuations from")
    rel = key.split(":", 1)[1]
    path = (roots[0] / rel).resolve()
    if not any(root in path.parents for root in roots):
        raise CaptureError(f"recorded capture {rel!r} is outside the work directory")
    try:
        doc = orjson.loads(read_regular(path, limit=MAX_RECORDED_BYTES))
    except ReadRefused as exc:
        raise CaptureError(f"cannot read {rel}: {exc.message}") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise CaptureError(f"cannot read {rel}: {type(exc).__name__}") from None
    prompt, completion = _recorded_ids(doc)
    if prompt is None and completion is None:
        raise CaptureError(f"{rel} holds no token ids")
    usage = doc.get("usage") if isinstance(doc.get("usage"), Mapping) else None
    cap = {
        "status": doc.get("status"),
        "prompt_token_ids": prompt,
        "completion_token_ids": completion,
        "completion_logprobs": _recorded_logprobs(doc),
        "completion_topk_by_position": _recorded_topk(doc),
        "missing": [],
    }
    data = from_policy_capture(cap, key=key, label=f"recorded continuation {rel}", usage=usage)
    data.kind = "continuation"
    if data.topk is not None:
        data.topk_semantics = "top logprobs as returned by the server (probability = exp(logprob))"
    _recorded_request(case, doc, data, prompt)
    return data


@dataclass(frozen=True)
class _AttemptIds:
    """The token fields of one attempt record, and the source step its repair site names."""

    student: list[int] | None
    teacher: list[int] | None
    completion: list[int] | None
    rollout: Any  # repair_rollout_token_capture (a mapping or a model), or None
    src_idx: int | None
    src_cap: Mapping[str, Any] | None


def _load_attempt(case: CaptureCase | None, key: str) -> CaptureData:
    """``attempt:<round>[.<k>]:<field>``: one token field of an attempt record, with its
    consistency checks, the student/teacher diff, the hint, the alignment and the media."""
    m = _KEY_RE.match(key)
    if not m:
        raise CaptureError(f"bad capture name {key!r}: expected step:<i>, attempt:<round>[.<k>]:<field> or recorded:<path>")
    rnd, k, field = int(m.group(1)), int(m.group(2) or 0), m.group(3)
    if field not in ATTEMPT_FIELDS:
        raise CaptureError(f"unknown attempt field {field!r}; expected one of {', '.join(ATTEMPT_FIELDS)}")
    att, run_dir = _find_attempt(case, rnd, k)
    value = field_of(att, field)
    if value is None:
        raise CaptureError(f"round {rnd} attempt {k} has no {field}")
    src_idx, src_cap = _source_step_capture(case, att)
    ids = _AttemptIds(
        student=_int(field_of(att, "student_prompt_ids")),
        teacher=_int(field_of(att, "teacher_prompt_ids")),
        completion=_int(field_of(att, "completion_ids")),
        rollout=field_of(att, "repair_rollout_token_capture"),
        src_idx=src_idx,
        src_cap=src_cap,
    )
    data = _attempt_field(key, f"round {rnd} attempt {k}: {FIELD_LABELS[field]}", field, value, ids.rollout)
    data.run_dir = str(run_dir) if run_dir is not None else None
    _consistency_checks(data, ids)
    _student_teacher(data, ids, field)
    _attempt_hint(data, att, field, value, rnd)
    if ids.completion is not None and ids.src_cap is not None:  # teacher completion vs source step completion
        src_completion = _int(ids.src_cap.get("completion_token_ids"))
        if src_completion is not None:
            data.source_completion_ids = src_completion
            data.teacher_completion_ids = ids.completion
            data.alignment, data.alignment_method = align(src_completion, ids.completion)
    _attempt_media(data, field_of(att, "psd_media"), run_dir, ids)
    return data


def _attempt_field(key: str, label: str, field: str, value: Any, rollout: Any) -> CaptureData:
    """The capture of one attempt field: the rollout capture as stored, or a list of ids
    (a teacher completion borrows the logprobs and top-k of a rollout capture of the same ids)."""
    if field == "repair_rollout_token_capture":
        return from_policy_capture(value, key=key, label=label)
    ids = _int(value)
    if ids is None:
        raise CaptureError(f"{label.split(':', 1)[0]}: {field} is not a list of integers")
    if field != "completion_ids":
        return CaptureData(key=key, label=label, kind="prompt", ids=ids, completion_start=None)
    data = CaptureData(key=key, label=label, kind="completion", ids=ids, completion_start=0)
    rc_completion = _int(field_of(rollout, "completion_token_ids"))
    if rc_completion is not None and rc_completion == ids:
        data.logprobs = normalise_logprobs(field_of(rollout, "completion_logprobs"))
        data.topk = normalise_topk(field_of(rollout, "completion_topk_by_position"))
        data.topk_k = field_of(rollout, "topk") if isinstance(field_of(rollout, "topk"), int) else None
        data.topk_semantics = "probabilities renormalised over the k returned logprobs (as stored)"
        data.status = field_of(rollout, "status")
        miss = field_of(rollout, "missing") or []
        data.missing = [str(x) for x in miss] if isinstance(miss, (list, tuple)) else [str(miss)]
        data.logprob_semantics = field_of(rollout, "teacher_logprob_semantics")
        data.checks = capture_checks(data, prompt_len=None, completion_len=len(ids))
        data.notes.append("logprobs and top-k from repair_rollout_token_capture")
    elif rc_completion is not None:
        data.checks.append(Check("fail", "completion_ids differ from repair_rollout_token_capture.completion_token_ids"))
    else:
        data.checks.append(Check("info", "no teacher rollout capture with logprobs for these ids"))
    return data


def _consistency_checks(data: CaptureData, ids: _AttemptIds) -> None:
    """§2.5 token fields: the student prompt is the source step's, the teacher prompt the rollout's."""
    if ids.student is not None and ids.src_cap is not None:
        src_prompt = _int(ids.src_cap.get("prompt_token_ids"))
        if src_prompt is not None:
            data.checks.append(
                Check("ok", f"student_prompt_ids = source step {ids.src_idx} prompt_token_ids")
                if src_prompt == ids.student
                else Check("fail", f"student_prompt_ids differ from source step {ids.src_idx} prompt_token_ids")
            )
    if ids.teacher is not None and ids.rollout is not None:
        rp = _int(field_of(ids.rollout, "prompt_token_ids"))
        if rp is not None:
            data.checks.append(
                Check("ok", "teacher_prompt_ids = teacher rollout capture prompt ids")
                if rp == ids.teacher
                else Check("fail", "teacher_prompt_ids differ from repair_rollout_token_capture.prompt_token_ids")
            )


def _student_teacher(data: CaptureData, ids: _AttemptIds, field: str) -> None:
    """The student vs teacher prompt diff (the removed span highlighted in the student prompt)."""
    if ids.student is None or ids.teacher is None:
        return
    data.student_ids = ids.student
    data.teacher_ids = ids.teacher
    data.prompt_diff = prompt_diff(ids.student, ids.teacher)
    if field == "student_prompt_ids":
        a, b = data.prompt_diff.removed
        data.highlight = (a, b) if b > a else None


def _attempt_hint(data: CaptureData, att: Any, field: str, value: Any, rnd: int) -> None:
    """A hinted prompt: its length and hint text (the span is located by :func:`locate_hint`)."""
    data.round_index = rnd
    if field == "teacher_prompt_ids":
        data.hint_prompt_len = len(data.ids)
    elif field == "repair_rollout_token_capture":
        rp = _int(field_of(value, "prompt_token_ids"))
        data.hint_prompt_len = len(rp) if rp is not None else None
    if data.hint_prompt_len is not None:
        text = field_of(field_of(att, "hint_record"), "text")
        data.hint_text = text if isinstance(text, str) else None


def _attempt_media(data: CaptureData, media_obj: Any, run_dir: Path | None, ids: _AttemptIds) -> None:
    """The attempt's ``psd_media`` binding checked against its prompts' image-pad runs."""
    if media_obj is None:
        # psd_media is optional (older runtimes did not write it): image-pad runs without
        # it are information, not a media mismatch
        pad = pad_id_for((ids.student or []) + (ids.teacher or []))
        runs = {role: len(image_pad_runs(p, pad)) for role, p in (("student", ids.student), ("teacher", ids.teacher)) if p and pad is not None}
        if any(runs.values()):
            found = ", ".join(f"{role} {n}" for role, n in runs.items())
            data.media_note = f"media binding not recorded (older runtime): image-pad runs {found}, no psd_media in the record"
            data.checks.append(Check("info", data.media_note))
        return
    media, problems = parse_psd_media(media_obj, path=str((run_dir or Path(".")) / "repair_attempts.jsonl"))
    data.media = media
    data.media_problems = list(problems)
    if media is not None and run_dir is not None:
        data.media_report = verify_media(
            media, run_dir, student_prompt_ids=ids.student, teacher_prompt_ids=ids.teacher,
            record_path=str(run_dir / "repair_attempts.jsonl"),
        )


def _recorded_request(case: CaptureCase | None, doc: Mapping[str, Any], data: CaptureData, prompt: list[int] | None) -> None:
    """What a recorded continuation's request says: its hint (the prompt is a hinted
    prompt), whether it asked for logprobs, and its source step (the student prompt)."""
    req = doc.get("request")
    if not isinstance(req, Mapping):
        return
    body = req.get("body")
    if isinstance(body, Mapping):
        data.logprobs_requested = body.get("logprobs") is True
    origin: Mapping[str, Any] = req["origin"] if isinstance(req.get("origin"), Mapping) else {}
    rnd = origin.get("round_index")
    data.round_index = rnd if isinstance(rnd, int) and not isinstance(rnd, bool) else None
    hint = req.get("hint")
    if prompt is None or not isinstance(hint, str) or not hint.strip():
        return
    data.hint_text = hint
    data.hint_prompt_len = len(prompt)
    student = source_step_prompt_ids(case, origin.get("source_step_index"))
    if student is not None:
        data.student_ids = student
        data.teacher_ids = prompt
        data.prompt_diff = prompt_diff(student, prompt)


def archived_hinted_prompt(case: CaptureCase | None, hint: str | None, round_index: int | None = None) -> tuple[list[int], str] | None:
    """An archived attempt's ``teacher_prompt_ids`` for the same hint text: the prompt the
    driver built with this hint (of ``round_index`` when it has one, else the latest round)."""
    if case is None or not hint or not hint.strip():
        return None
    want = hint.strip()
    found: list[tuple[bool, int, list[int]]] = []
    for rnd, _dir, atts in _attempt_groups(case):
        for att in atts:
            text = field_of(field_of(att, "hint_record"), "text")
            ids = _int(field_of(att, "teacher_prompt_ids"))
            if isinstance(text, str) and text.strip() == want and ids:
                found.append((rnd == round_index, rnd, ids))
    if not found:
        return None
    _, rnd, ids = max(found, key=lambda f: (f[0], f[1]))
    return ids, f"the archived hinted prompt of round {rnd}"


def locate_hint(case: CaptureCase | None, data: CaptureData, decoder: TokenDecoder) -> HintSpan | None:
    """The hint span of a hinted-prompt capture (None for any other capture). A rebuilt
    prompt (a continuation) is also compared with the archived prompt of the same hint."""
    if not data.hinted_prompt:
        return None
    prompt = data.ids[: data.hint_prompt_len]
    archived = archived_hinted_prompt(case, data.hint_text, data.round_index) if data.kind == "continuation" else None
    piece_bytes = decoder.piece_bytes if decoder.source != DecodeSource.RAW else None
    return hint_span(
        prompt,
        piece_bytes,
        data.hint_text,
        student=data.student_ids,
        archived_hinted=archived[0] if archived else None,
        archived_label=archived[1] if archived else "",
        prompt_label="the live prompt" if data.kind == "continuation" else "the teacher prompt",
        decoder_label=decoder.label,
    )


def _int(value: Any) -> list[int] | None:
    """A list of ints (the same list, not a copy), or None (bools are not ids)."""
    return _int_list(value)


def _recorded_logprobs(doc: Mapping[str, Any]) -> list[Any] | None:
    lps = doc.get("completion_logprobs")
    if isinstance(lps, list):
        return lps
    lp = doc.get("logprobs")
    if isinstance(lp, list):
        return [e.get("logprob") if isinstance(e, Mapping) else e for e in lp]
    return None


def _recorded_topk(doc: Mapping[str, Any]) -> list[Any] | None:
    top = doc.get("completion_topk_by_position")
    if isinstance(top, list):
        return top
    lp = doc.get("logprobs")
    if isinstance(lp, list) and lp and isinstance(lp[0], Mapping) and "top" in lp[0]:
        rows = []
        for e in lp:
            row = []
            for t in (e.get("top") or []) if isinstance(e, Mapping) else []:
                if isinstance(t, Mapping) and prob_of(t.get("logprob")) is not None:
                    row.append({"token_id": t.get("token_id"), "probability": prob_of(t["logprob"]), "logprob": t["logprob"], "token": t.get("token")})
            rows.append(row)
        return rows
    return None
