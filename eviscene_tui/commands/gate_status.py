"""``eviscene-tui gate-status ROOT [--gate-dir DIR] [--json]``: the operator gate of a search.

JSON: ``{"root", "driver": {"pid", "host", "alive", "last_seen", "state", "waiting"},
"pending": [{"kind": "round"|"hint"|"attempt", "round", "index", "name", "actions",
"offers", "streaming", "driver", "feedback", "hint", "attempt"}], "decisions": [{"kind",
"round", "index", "action", "operator", "at", "step", "decision_id"}],
"relocalizations": [{"round", "asked_step", "used_step", "mismatch"}], "journal": {"ok",
"events", "broken_at", "problems", "untrusted_decisions", "missing_from_journal"},
"resume": null | "<why and the command that resumes the search under the gate>",
"policy_calls": [{"round", "hint", "stage", "status": "running"|"complete"|"failed",
"started_at", "finished_at", "prompt_tokens", "completion_tokens", "finish_reason",
"request_id"}], "problems": [...]}`` (``problems`` also holds the journal's breaks,
the step mismatches and why the live view is unavailable). ``policy_calls`` are the
policy calls of the rounds run under the gate, from the sidecar's live channel, in
the order they started: the real driver's ``StageRunner._call_llm`` calls, the bundled
driver's continuations. Reading only. Exit 0, 1 when ROOT has no gate directory (said on stderr
with --json), 2 when ROOT does not exist.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


from eviscene_tui.gate.protocol import sidecar_for, utc_iso
from eviscene_tui.gate.review import journal_check, resume_note, step_checks
from eviscene_tui.gate.sidecar import GateRequest, read_status
from eviscene_tui.safe_text import safe_text, terminal_json
from eviscene_tui.state.live import LiveCall, LiveCalls, read_policy_calls


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", help="the search root (the driver's --output-dir), or a folder holding one gated search")
    parser.add_argument("--gate-dir", help="the gate's sidecar directory (default: <root>.eviscene-gate)")
    parser.add_argument("--json", action="store_true", help="JSON output")


def _line(text: str) -> str:
    return safe_text(text, single_line=True, limit=240)


def gated_roots_under(folder: Path, depth: int = 4) -> list[Path]:
    """The search roots with a gate sidecar (``<root>.eviscene-gate``) under ``folder``,
    so a folder holding one gated search (the demo's work directory) finds it."""
    found: list[Path] = []
    level = [folder]
    for _ in range(depth):
        nxt: list[Path] = []
        for directory in level:
            try:
                children = sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink())
            except OSError:
                continue
            for child in children:
                if child.name.endswith(".eviscene-gate"):
                    continue
                if sidecar_for(child).is_dir():
                    found.append(child)
                else:
                    nxt.append(child)
        level = nxt
    return found


def run(args: argparse.Namespace) -> int:
    if not Path(args.root).exists():
        print(_line(f"eviscene-tui gate-status: error: {args.root} does not exist"), file=sys.stderr)
        return 2
    status = read_status(args.root, args.gate_dir)
    if not status.exists and args.gate_dir is None and Path(args.root).is_dir():
        found = gated_roots_under(Path(args.root))
        if len(found) == 1:
            status = read_status(found[0])
        elif found:
            print(_line(f"{args.root} holds {len(found)} gated searches; name one:"))
            for root in found:
                print(_line(f"  {root}"))
            return 1
    checks = step_checks(status) if status.exists else []
    journal = journal_check(status.gate_dir) if status.exists else None
    resume = resume_note(status.root) if status.exists else None
    calls = read_policy_calls(status.gate_dir) if status.exists else LiveCalls()
    extra = [c.describe() for c in checks if c.mismatch] + (list(journal.lines) if journal is not None else [])
    if calls.unavailable and not any(calls.unavailable in p for p in status.problems):
        extra.append(calls.unavailable)
    if args.json:
        doc = status.as_json()
        doc["problems"] = doc["problems"] + extra
        doc["relocalizations"] = [c.as_dict() for c in checks]
        doc["journal"] = journal.as_dict() if journal is not None else None
        doc["resume"] = resume
        doc["policy_calls"] = [c.as_row() for c in calls.in_order()]
        sys.stdout.buffer.write(terminal_json(doc, indent=True) + b"\n")
        if not status.exists:  # the document alone looks like an idle gate: say why it is empty
            print(_line(f"no gate directory {status.gate_dir}: no driver was gated for {status.root}"), file=sys.stderr)
        return 0 if status.exists else 1
    if not status.exists:
        print(_line(f"no gate directory {status.gate_dir}: no driver was gated for {status.root}"))
        return 1
    d = status.driver
    if not d.present:
        print("driver: no heartbeat yet")
    else:
        state = "alive" if d.alive else ("exited" if d.state == "exited" else "GONE (no heartbeat)")
        code = f", exit code {d.exit_code}" if d.exit_code is not None else ""
        print(_line(f"driver: pid {d.pid} on {d.host}, {state}{code}, last seen {d.last_seen}"))
    if resume:
        print(_line(f"RESUME: {resume}"))
    for p in status.pending:
        print(_line(pending_line(p)))
    if not status.pending:
        print("nothing pending")
    untrusted = journal.untrusted if journal is not None else frozenset()
    for dec in status.decisions:
        mark = "UNTRUSTED (the journal breaks before it) " if dec.decision_id in untrusted else ""
        print(_line(f"decided: {mark}{dec.describe()}" + (" [consumed]" if dec.consumed else "") + (f" — {dec.reason}" if dec.reason else "")))
    print_calls(calls.in_order())
    for problem in list(status.problems) + extra:
        print(_line(f"problem: {problem}"))
    return 0


SHOWN_CALLS = 12  # the text output's policy calls: the last few (--json has them all)


def call_line(call: LiveCall) -> str:
    """One policy call: where, stage, and its state (running since / tokens, finish, duration)."""
    where = f"round {call.round}" + (f" hint {call.hint}" if call.hint is not None else "")
    if call.status == "running":
        what = f"running since {utc_iso(call.started_at)}"
    elif call.status == "failed":
        what = f"failed ({call.error_type or 'error'})"
    else:
        duration = call.duration_ms
        what = (f"{call.prompt_tokens if call.prompt_tokens is not None else '?'} prompt + "
                f"{call.completion_tokens if call.completion_tokens is not None else '?'} completion tokens, "
                f"finish {call.finish_reason or '?'}" + (f", {duration / 1000:.2f} s" if duration is not None else ""))
    request = f" [{call.request_id}]" if call.request_id else ""
    return f"  {where} · {call.stage or 'unknown stage'}: {what}{request}"


def print_calls(calls: list[LiveCall]) -> None:
    if not calls:
        return
    hidden = len(calls) - SHOWN_CALLS
    print(_line(f"policy calls: {len(calls)}" + (f" (the last {SHOWN_CALLS}; --json lists all)" if hidden > 0 else "")))
    for call in calls[-SHOWN_CALLS:]:
        print(_line(call_line(call)))


def pending_line(p: GateRequest) -> str:
    """One pending gate: its kind, round, what it asks about and what it offers."""
    offers = ", ".join(o["action"] for o in p.offers)
    if p.kind == "round":
        fb = p.feedback
        what = (f"needs_relocalization={fb.get('needs_relocalization')} locked_hint={bool(fb.get('locked_hint'))} "
                f"excluded={len(fb.get('excluded_hints') or [])}")
    elif p.kind == "hint":
        hint = p.hint or {}
        what = f"\u201c{hint.get('text')}\u201d (driver rule: {hint.get('revision_rejection') or 'admits it'})" if hint else "no hint yet"
    else:
        what = "its continuation is streaming" if p.streaming else "the attempt waits for its verdict"
    index = f" {p.kind} {p.hint_index}" if p.kind != "round" else ""
    return f"PENDING {p.kind} gate, round {p.round}{index}: {what} [offers: {offers}]"
