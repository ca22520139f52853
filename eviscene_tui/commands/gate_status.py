"""``eviscene-tui gate-status ROOT [--gate-dir DIR] [--json]``: the operator gate of a search.

JSON: ``{"root", "driver": {"pid", "host", "alive", "last_seen"},
"pending": [{"kind", "round", "feedback", "hint"}], "decisions": [{"kind",
"round", "action", "operator", "at"}], "problems": [...]}``. Reading only.
Exit 0, 1 when ROOT has no gate directory (said on stderr with --json), 2 when ROOT does not exist.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from eviscene_tui.gate.protocol import sidecar_for
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.safe_text import safe_text


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
    if args.json:
        sys.stdout.write(orjson.dumps(status.as_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
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
    if status.pending:
        for p in status.pending:
            if p.kind == "round":
                fb = p.feedback
                print(_line(f"PENDING round gate, round {p.round}: needs_relocalization={fb.get('needs_relocalization')} "
                            f"locked_hint={bool(fb.get('locked_hint'))} excluded={len(fb.get('excluded_hints') or [])}"))
            else:
                hint = p.hint or {}
                print(_line(f"PENDING hint gate, round {p.round} hint {p.hint_index}: {hint.get('text')!r} "
                            f"(driver rule: {hint.get('revision_rejection') or 'admits it'})"))
    else:
        print("nothing pending")
    for dec in status.decisions:
        print(_line(f"decided: {dec.describe()}" + (" [consumed]" if dec.consumed else "") + (f" — {dec.reason}" if dec.reason else "")))
    for problem in status.problems:
        print(_line(f"problem: {problem}"))
    return 0
