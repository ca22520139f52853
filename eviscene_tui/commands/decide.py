"""``eviscene-tui decide ROOT ACTION --round N [--step K] [--text T] [--reason R] [--checker K=V]… [--operator NAME] [--gate-dir DIR]``

ACTION is one of the gate protocol's decision kinds (``eviscene_tui.gate.protocol``):
approve-round, relocalize, stop, approve-hint, reject-hint, add-hint,
accept-attempt, reject-attempt, cancel-continuation. The decision is for the
first pending gate of round N whose driver offers it. One line says what
happened: exit 0 when the decision is taken (the line says whether it is
journaled, and when the driver is not running), 1 when refused (nothing pending
offers it, already decided: the line names who decided what and when, a step
outside the trace, a disk that refused the write), 2 for bad usage (also a ROOT
that does not exist or has no gate directory).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eviscene_tui.cli import UsageError
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.decide import DecideUsage, decide
from eviscene_tui.gate.sidecar import gate_dir_for
from eviscene_tui.safe_text import safe_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", help="the search root (the driver's --output-dir)")
    parser.add_argument("action", choices=P.ACTIONS)
    parser.add_argument("--round", type=int, required=True, help="the round the decision is for")
    parser.add_argument("--step", type=int, help="relocalize: the earliest error step K (source step index)")
    parser.add_argument("--text", default="", help="add-hint: the hint (audited by the driver, then asked again)")
    parser.add_argument("--reason", default="", help="why (journaled; never given to the driver); required to reject")
    parser.add_argument("--checker", action="append", default=[], metavar="KEY=true|false",
                        help=f"reject-attempt / accept-attempt: a checker value ({', '.join(P.CHECK_NAMES)}); repeatable")
    parser.add_argument("--operator", help="who decides (default: $EVISCENE_OPERATOR, else the login name)")
    parser.add_argument("--gate-dir", help="the gate's sidecar directory (default: <root>.eviscene-gate)")


def parse_checker(values: list[str]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for item in values:
        key, eq, value = item.partition("=")
        if not eq or value.lower() not in ("true", "false"):
            raise UsageError(f"--checker {item}: expected KEY=true or KEY=false")
        out[key.strip()] = value.lower() == "true"
    return out


def run(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not root.exists():
        raise UsageError(f"{args.root} does not exist")
    gdir = gate_dir_for(os.path.abspath(root), args.gate_dir)
    if not gdir.is_dir():
        # nothing was ever gated here: a wrong ROOT or --gate-dir, not a refused decision
        raise UsageError(f"no gate directory {gdir}: no driver was gated for {root} (a gated driver runs under `eviscene-tui gate`)")
    try:
        result = decide(args.root, args.action, args.round, step=args.step, text=args.text, reason=args.reason,
                        checker=parse_checker(args.checker), operator=args.operator, gate_dir=args.gate_dir)
    except DecideUsage as exc:
        raise UsageError(str(exc)) from None
    notes = "".join(f" (note: {note})" for note in result.notes)
    if result.taken:
        print(safe_text(result.message + notes, single_line=True))
        return 0
    print(safe_text(f"eviscene-tui decide: refused: {result.message}{notes}", single_line=True), file=sys.stderr)
    return 1
