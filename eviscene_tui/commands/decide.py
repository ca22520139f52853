"""``eviscene-tui decide ROOT ACTION --round N [--step K] [--reason TEXT] [--operator NAME] [--gate-dir DIR]``

ACTION: approve-round, relocalize, stop, approve-hint, reject-hint. Exit 0
when the decision is taken, 1 when refused (nothing pending of that kind for
that round, or already decided: the message names who decided what and when),
2 for bad usage (also a ROOT that does not exist or has no gate directory).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eviscene_tui.cli import UsageError
from eviscene_tui.gate.decide import DecideUsage, decide
from eviscene_tui.gate.sidecar import gate_dir_for
from eviscene_tui.safe_text import safe_text

ACTIONS = ("approve-round", "relocalize", "stop", "approve-hint", "reject-hint")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", help="the search root (the driver's --output-dir)")
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("--round", type=int, required=True, help="the round the decision is for")
    parser.add_argument("--step", type=int, help="relocalize: the earliest error step K (source step index)")
    parser.add_argument("--reason", default="", help="why (journaled; never given to the driver)")
    parser.add_argument("--operator", help="who decides (default: the login name)")
    parser.add_argument("--gate-dir", help="the gate's sidecar directory (default: <root>.eviscene-gate)")


def run(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not root.exists():
        raise UsageError(f"{args.root} does not exist")
    gdir = gate_dir_for(os.path.abspath(root), args.gate_dir)
    if not gdir.is_dir():
        # nothing was ever gated here: a wrong ROOT or --gate-dir, not a refused decision
        raise UsageError(f"no gate directory {gdir}: no driver was gated for {root} (a gated driver runs under `eviscene-tui gate`)")
    try:
        result = decide(args.root, args.action, args.round, step=args.step, reason=args.reason,
                        operator=args.operator, gate_dir=args.gate_dir)
    except DecideUsage as exc:
        raise UsageError(str(exc)) from None
    for note in result.notes:
        print(safe_text(f"note: {note}", single_line=True), file=sys.stderr)
    if result.taken:
        print(safe_text(result.message, single_line=True))
        return 0
    print(safe_text(f"eviscene-tui decide: refused: {result.message}", single_line=True), file=sys.stderr)
    return 1
