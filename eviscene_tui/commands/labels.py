"""``eviscene-tui labels PATH [--workdir W] [--csv | --json]``: the triage labels as a table.

One row per case under PATH, labelled or not, with exactly these columns (scalars only,
so ``pandas.read_csv`` / ``pandas.read_json`` load it as it is):

    case             the case folder relative to PATH
    case_id          from the run's ledgers, else its bound candidate.json
    candidate_id     likewise
    status           the search / run status (as the runs table)
    category         the site's semantic category (no site: the localizer's or the candidate's)
    no_site_reasons  why no recoverable site was found ("; " between codes; "" with a site)
    label            the case's one current label ("" when unlabelled)
    note             the note given with it
    operator         who set it
    labelled_at      when (UTC, ISO 8601)

The labels are read as the app reads them: every work directory that may hold the
cases' records (``journal.records.read_workdirs``), merged in time order. The journal
export with every event is ``eviscene-tui decisions``. Exit 3 when PATH holds no case
(as ``check``), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from pathlib import Path
from typing import Any


from eviscene_tui.cli import UsageError, add_path_map_argument, path_map_from_args
from eviscene_tui.safe_text import csv_cell, safe_text, terminal_json

NO_CASE = 3  # as `check`: a mistyped or empty folder is not an empty export
COLUMNS = ("case", "case_id", "candidate_id", "status", "category", "no_site_reasons", "label", "note", "operator", "labelled_at")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="a run, a search root, a wrapper, or any folder holding them")
    parser.add_argument("--workdir", help="the work directory the app ran with (its --workdir); found by the usual rule otherwise")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="CSV (a header line, then one line per case)")
    fmt.add_argument("--json", action="store_true", help="a JSON array of one flat object per case")
    parser.add_argument("--config", help="config file ([paths] workdir and map; default: $EVISCENE_TUI_CONFIG or the XDG config dir)")
    add_path_map_argument(parser)


def label_rows(path: Path, workdir: Path | None = None, *, config: str | None = None, path_map_args: list[str] | None = None,
               notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The export's rows for the cases under ``path`` (see the module doc)."""
    from eviscene_tui.artifacts.layout import discover_cases  # lazy: the loaders load when an export runs (`labels --help` stays fast)
    from eviscene_tui.settings import load_settings  # lazy: pydantic, as above
    from eviscene_tui.state.scan import build_row  # lazy: as above
    from eviscene_tui.state.triage import ListedCase, load_triage  # lazy: as above
    from eviscene_tui.storage import choose_workdir  # lazy: as above

    settings = load_settings(config)
    path_map = path_map_from_args(argparse.Namespace(path_map=path_map_args or []), settings)
    root = path.resolve()
    rows = [(ref, build_row(ref, root, None, path_map=path_map)) for ref in discover_cases(root)]
    write, _why = choose_workdir(root, workdir, settings.paths.workdir)
    listed = [ListedCase(row.key, os.fspath(ref.path), layout=str(ref.layout)) for ref, row in rows]
    marks = load_triage(listed, opened=root, workdir=write)
    if notes is not None:
        notes.extend(settings.problems)
        notes.append("labels read from: " + (", ".join(str(j) for j in marks.journals) or "no review journal"))
    out = []
    for ref, row in sorted(rows, key=lambda item: item[1].key):
        t = marks.for_key(marks.records.get(row.key))
        case_id = row.case_id if row.case_id and row.case_id != (ref.key or "") else ""
        out.append({
            "case": os.path.relpath(ref.path, root).replace(os.sep, "/"),
            "case_id": case_id,
            "candidate_id": row.candidate_id,
            "status": row.status,
            "category": row.category,
            "no_site_reasons": row.no_site_reason,
            "label": t.label if t is not None else "",
            "note": t.note if t is not None else "",
            "operator": t.operator if t is not None and t.label else "",
            "labelled_at": t.ts if t is not None and t.label else "",
        })
    return out


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        raise UsageError(f"{args.path} does not exist")
    if not path.is_dir():
        raise UsageError(f"{args.path} is not a directory")
    workdir = Path(args.workdir) if args.workdir else None
    if workdir is not None and not workdir.is_dir():
        raise UsageError(f"--workdir {args.workdir} is not a directory")
    notes: list[str] = []
    rows = label_rows(path, workdir, config=args.config, path_map_args=args.path_map, notes=notes)
    for note in notes:
        sys.stderr.write(f"eviscene-tui labels: {safe_text(note, single_line=True)}\n")
    if args.json:
        sys.stdout.buffer.write(terminal_json(rows, indent=True) + b"\n")
    elif args.csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        tty = sys.stdout.isatty()
        writer.writerows({k: csv_cell(v, to_terminal=tty) if isinstance(v, str) else v for k, v in row.items()} for row in rows)
        sys.stdout.write(buf.getvalue())
    else:
        _print_table(rows)
    if not rows:
        sys.stderr.write(f"eviscene-tui labels: no PSD cases found under {safe_text(args.path, single_line=True)}\n")
        return NO_CASE
    return 0


def _print_table(rows: list[dict[str, Any]]) -> None:
    """An aligned table for the terminal (every value through safe_text; the note's first line)."""
    shown = ("case", "case_id", "status", "category", "label", "operator", "labelled_at", "note")
    cells = [[safe_text(str(r[c]).split("\n", 1)[0], single_line=True, limit=60) for c in shown] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(shown)]
    print("  ".join(c.ljust(widths[i]) for i, c in enumerate(shown)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip())
    labelled = sum(1 for r in rows if r["label"])
    print(f"{len(rows)} case(s), {labelled} labelled")
