"""What the record says the driver did with the gate's decisions (the app's side, reading only).

- :func:`step_checks`: each relocalize decision with a step, against the step the
  driver used in that round (``repair_candidates.jsonl``, else the round's
  ``semantic-localization.json``): a driver that relocalized on its own elsewhere is
  a mismatch, shown on the card, in ``gate-status --json`` and in ``decisions``;
- :func:`pinned_site`: the real driver's ``locate_failure_site`` takes a strict-audit
  failure (``all_steps[N]`` in the audit) or a protocol-rejection step before any
  semantic localization, so on such a case a relocalize cannot move the site: said on
  the relocalize dialog before the operator decides;
- :func:`journal_check`: the gate journal's chain (with its head anchored outside it)
  and what the sidecar holds that the journal lacks; the decisions at and after a
  break are not to be trusted, and are marked wherever decisions are listed;
- :func:`resume_note`: the "round changed by the gate, a plain ``--resume`` fails"
  state, with the command that resumes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.integrity.gate_resume import gate_resume_note
from eviscene_tui.artifacts.jsonio import read_bound, read_json, read_jsonl
from eviscene_tui.artifacts.trace import load_trace
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.decide import bound_trace_path, journal_path, unjournaled
from eviscene_tui.gate.sidecar import GateStatus
from eviscene_tui.journal import parse_journal_bytes, verify_chain

PROTOCOL_REJECTIONS = ("format_error", "output_rejected", "policy_replan")
_ALL_STEPS = re.compile(r"all_steps\[(\d+)\]")


@dataclass(frozen=True)
class StepCheck:
    round: int
    decision_id: str
    asked: int
    used: int | None  # None: the round has not localized yet

    @property
    def mismatch(self) -> bool:
        return self.used is not None and self.used != self.asked

    def describe(self) -> str:
        if self.used is None:
            return f"round {self.round}: relocalize asked step {self.asked}; the driver has not localized it yet"
        if self.mismatch:
            return f"round {self.round}: the operator asked step {self.asked}, the driver used step {self.used}"
        return f"round {self.round}: the driver used step {self.used}, as asked"

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "decision_id": self.decision_id, "asked_step": self.asked, "used_step": self.used,
                "mismatch": self.mismatch}


def used_step(root: Path, round_index: int) -> int | None:
    """The failure step the driver localized round ``round_index`` at, from its files."""
    rdir = root / "rounds" / f"round-{round_index:02d}"
    rows, _ = read_jsonl(rdir / "repair_candidates.jsonl") if (rdir / "repair_candidates.jsonl").is_file() else ([], [])
    for row in reversed(rows):
        site = row.get("repair_site") if isinstance(row, dict) else None
        step = site.get("source_step_index") if isinstance(site, dict) else None
        if type(step) is int:
            return step
    doc, _ = read_json(rdir / "semantic-localization.json") if (rdir / "semantic-localization.json").is_file() else (None, [])
    for candidate in (doc.get("candidates") or []) if isinstance(doc, dict) else []:
        if isinstance(candidate, dict) and candidate.get("selected") and type(candidate.get("source_step_index")) is int:
            return int(candidate["source_step_index"])
    return None


def step_checks(status: GateStatus) -> list[StepCheck]:
    return [StepCheck(d.round, d.decision_id, d.step, used_step(status.root, d.round))
            for d in status.decisions if d.action == P.RELOCALIZE and d.step is not None]


def pinned_site(root: Path, session: dict[str, Any]) -> str | None:
    """Why a relocalize cannot move the site of this real-driver search, or None."""
    if session.get("driver") == "bundled":
        return None
    state = read_bound(root / "search-state.json", verify=False)
    inputs = state.identity.get("inputs") if isinstance(state.identity, dict) else None
    audit = inputs.get("audit") if isinstance(inputs, dict) else None
    if isinstance(audit, dict) and isinstance(audit.get("path"), str) and Path(audit["path"]).is_file():
        doc, _ = read_json(audit["path"])
        found = _ALL_STEPS.search(_strings(doc))
        if found:
            return (f"this case's audit names all_steps[{found.group(1)}]: the driver's locate_failure_site takes that strict-audit "
                    "failure before any semantic localization, so a relocalize cannot move the site")
    path = bound_trace_path(root)
    trace, _ = load_trace(path, lazy=True) if path is not None else (None, [])
    if trace is not None:
        for index in trace.policy_step_indices():
            brief = trace.brief(index)
            if brief.is_protocol_rejection or brief.action_type in PROTOCOL_REJECTIONS:
                return (f"step {index} is a protocol rejection ({brief.action_type}): the driver's locate_failure_site "
                        "takes it before any semantic localization, so a relocalize cannot move the site")
    return None


def _strings(value: Any, out: list[str] | None = None, depth: int = 0) -> str:
    out = [] if out is None else out
    if depth > 64:
        return ""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out, depth + 1)
    return "\n".join(out) if depth == 0 else ""


@dataclass(frozen=True)
class JournalCheck:
    ok: bool
    events: int
    broken_at: int | None  # the first event seq that does not verify
    problems: tuple[str, ...]
    untrusted: frozenset[str]  # decision ids of events at and after the break
    missing: tuple[str, ...]  # decisions the sidecar holds and the journal lacks

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "events": self.events, "broken_at": self.broken_at, "problems": list(self.problems),
                "untrusted_decisions": sorted(self.untrusted), "missing_from_journal": list(self.missing)}

    @property
    def lines(self) -> tuple[str, ...]:
        out = [f"gate journal: {p}" for p in self.problems]
        if self.broken_at is not None:
            out.append(f"gate journal: decisions from event {self.broken_at} on are not to be trusted (the chain breaks there)")
        return tuple(out) + tuple(f"gate journal: {m}" for m in self.missing)


def journal_check(gate_dir: Path) -> JournalCheck:
    path = journal_path(gate_dir)
    report = verify_chain(path)
    untrusted: set[str] = set()
    if report.broken_at is not None:
        try:
            events, _ = parse_journal_bytes(P.read_regular(path, limit=P.MAX_JOURNAL_BYTES))
        except (OSError, ValueError):
            events = []
        for position, event in enumerate(events):
            data = event.get("data")
            if position >= report.broken_at and isinstance(data, dict) and isinstance(data.get("decision_id"), str):
                untrusted.add(data["decision_id"])
    return JournalCheck(report.ok, report.events, report.broken_at, tuple(report.problems), frozenset(untrusted),
                        tuple(unjournaled(gate_dir)) if gate_dir.is_dir() else ())


def resume_note(root: Path) -> str | None:
    return gate_resume_note(str(root))
