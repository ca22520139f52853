"""``eviscene-tui check PATH [--json]``: headless triage and integrity report.

Exit 0 when no problems, 1 when any, 2 for a missing PATH or bad usage, 3 when PATH
holds no case at all (a mistyped or empty folder must not pass a CI step).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eviscene_tui.cli import UsageError, add_path_map_argument, path_map_from_args
from eviscene_tui.safe_text import safe_text, terminal_json

if TYPE_CHECKING:
    from eviscene_tui.artifacts.report import CheckReport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="a run, a search root, a wrapper, or any folder holding them")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--config", help="config file (its [paths] map table; default: $EVISCENE_TUI_CONFIG or the XDG config dir)")
    add_path_map_argument(parser)


def run(args: argparse.Namespace) -> int:
    given = args.path
    root = Path(given)
    if not root.exists():
        raise UsageError(f"{given} does not exist")
    if not root.is_dir():
        raise UsageError(f"{given} is not a directory")

    from eviscene_tui.artifacts.report import build_check_report  # lazy: the loaders load when a check runs, so `check --help` stays fast
    from eviscene_tui.settings import load_settings  # lazy: pydantic loads when a check runs, so `check --help` stays fast

    settings = load_settings(args.config)
    for problem in settings.problems:
        sys.stderr.write(f"eviscene-tui check: warning: {problem}\n")
    report = build_check_report(root, given, path_map=path_map_from_args(args, settings))
    if args.json:
        sys.stdout.buffer.write(terminal_json(report, indent=True) + b"\n")
        sys.stdout.flush()
    else:
        sys.stdout.write(render_text(report))
        sys.stdout.flush()
    if not report["cases"]:
        sys.stderr.write(
            f"eviscene-tui check: no case found under {safe_text(given, single_line=True)}: no search root, run "
            "directory or multi-case wrapper (search-state.json, run-inputs.json, manifest.json, rounds/) in it\n"
        )
        return NO_CASE
    return 1 if report["summary"]["problems"] else 0


#: the exit status of a check that found no case under PATH
NO_CASE = 3


def _cell(value: Any, limit: int | None = None) -> str:
    return safe_text(value, single_line=True, limit=limit)


def render_text(report: CheckReport) -> str:
    """A compact aligned table of cases, their problems, and one summary line."""
    headers = ("CASE", "LAYOUT", "STATUS", "ROUNDS", "ATTEMPTS", "ACCEPTED", "PENDING", "PROBLEMS")
    rows = [
        (
            _cell(c["path"], 60),
            _cell(c["layout"]),
            _cell(c["status"], 28),
            str(c["rounds"]),
            str(c["attempts"]),
            str(c["accepted"]),
            str(c["pending"]),
            str(len(c["problems"])),
        )
        for c in report["cases"]
    ]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    numeric = {3, 4, 5, 6, 7}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(widths[i]) if i in numeric else c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    out = [f"check {_cell(report['root'])}", line(headers)]
    out.extend(line(r) for r in rows)
    problem_lines = []
    for p in report.get("problems", []):
        problem_lines.append(f"  {_cell(p['code'])}  {_cell(p['path'])}: {_cell(p['message'], 300)}")
    for c in report["cases"]:
        for p in c["problems"]:
            problem_lines.append(f"  {_cell(p['code'])}  {_cell(p['path'])}: {_cell(p['message'], 300)}")
    if problem_lines:
        out.append("")
        out.append("Problems:")
        out.extend(problem_lines)
    s = report["summary"]
    statuses = ", ".join(f"{_cell(k)} {v}" for k, v in s["by_status"].items()) or "none"
    out.append("")
    out.append(f"{s['cases']} case(s) ({statuses}); {s['problems']} problem(s)")
    return "\n".join(out) + "\n"
