"""``eviscene-tui decisions PATH [--json | --csv] [--events]``: export operator decisions.

PATH may be:
- a journal file (``*.jsonl``);
- a supervised search root (``<workdir>/supervised/<key>/``; its journal sits beside it);
- the app's work directory (every journal in it: ``journal/review.jsonl`` and
  ``supervised/*.decisions.jsonl``);
- an opened folder (a run root, a case, a tree of them): every journal of every work
  directory that may hold its cases' records (``journal.records.read_workdirs``:
  ``--workdir DIR`` or ``<PATH>.eviscene-tui``, the ``*.eviscene-tui`` folders of the cases
  and of their ancestors, the work directories the registry names for their record keys);
  the ``case_path`` column names the case folder under PATH a record key stands for;
- a gated search root or its gate directory (``<root>.eviscene-gate/decisions.jsonl``).

Default output is the folded decisions (every decision event with its status:
active / superseded / undone, and ``stale`` when an evidence file changed since).
Rows at and after a break of the hash chain are marked ``untrusted`` (``BROKEN`` in
the table); a gate journal's head is anchored outside it (``decisions.jsonl.head``), so
a dropped or rewritten last event breaks the chain too. For a gate journal the
sidecar's ``decisions/``, ``consumed/`` and ``applied/`` files are cross-checked: a
decision the journal lacks is reported (exit 1); each relocalize row says the step the
driver used (``step_used``; the table's step column shows ``asked→used`` on a mismatch).
``--events`` prints the raw chain instead, after verifying it; a broken chain is
a clear message on stderr and exit 1. Exit 1 also when no journal is found.
Reading only: the journals are not locked (a running app keeps writing).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.cli import UsageError
from eviscene_tui.gate.decide import unjournaled
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.review import used_step
from eviscene_tui.journal import fold, journals_in_workdir, parse_journal_bytes, stale_paths, verify_chain
from eviscene_tui.journal.paths import JOURNAL_DIR, REVIEW_JOURNAL, SUPERVISED_DIR, SUPERVISED_SUFFIX, supervised_journal_for_root
from eviscene_tui.safe_text import csv_cell, safe_text, terminal_json
from eviscene_tui.artifacts.layout import discover_cases
from eviscene_tui.journal.records import CaseRecords, RecordIndex, is_record_key, read_workdirs, record_key, tree_of
from eviscene_tui.storage import default_workdir


ROW_FIELDS = (
    "journal", "seq", "id", "ts", "operator", "action", "case", "case_path", "round", "step_index", "step_used", "hint_sha256",
    "attempt_id", "label", "reason", "status", "stale", "untrusted", "undone_by", "superseded_by", "evidence", "data",
)
EVENT_FIELDS = ("journal", "seq", "id", "ts", "operator", "action", "target", "reason", "evidence", "data", "prev", "hash")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="journal file, supervised root, work directory, or opened run root")
    parser.add_argument("--workdir", help="the work directory the app was run with (its --workdir); default: <PATH>.eviscene-tui; "
                        "the cases' and their ancestors' *.eviscene-tui and the registry's work directories are read too")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON output")
    fmt.add_argument("--csv", action="store_true", help="CSV output")
    parser.add_argument("--events", action="store_true", help="the raw event chain (verified) instead of folded decisions")


GATE_SUFFIX = ".eviscene-gate"  # the operator gate's sidecar (eviscene_tui.gate): <root>.eviscene-gate/decisions.jsonl
GATE_JOURNAL = "decisions.jsonl"


def _gate_journals(path: Path) -> list[Path]:
    """The gate journal of a gate directory, or of a search root's default gate sidecar
    (also when the journal was never written: its decisions are then all missing from it)."""
    for directory in (path, path.resolve().parent / (path.resolve().name + GATE_SUFFIX)):
        if (directory / "gate.json").is_file() and ((directory / GATE_JOURNAL).is_file() or any((directory / "decisions").glob("*.json"))):
            return [directory / GATE_JOURNAL]
    return []


def _base_for(journal: Path, opened_root: Path | None) -> Path | None:
    """Where a journal's evidence paths are relative to."""
    if journal.name == GATE_JOURNAL and journal.parent.name.endswith(GATE_SUFFIX):
        return journal.parent.parent / journal.parent.name[: -len(GATE_SUFFIX)]
    if journal.name.endswith(SUPERVISED_SUFFIX) and journal.parent.name == SUPERVISED_DIR:
        return journal.parent / journal.name[: -len(SUPERVISED_SUFFIX)]
    if journal.name == REVIEW_JOURNAL and journal.parent.name == JOURNAL_DIR:
        # an earlier version's evidence: relative to the tree the work directory sits beside
        tree = tree_of(journal.parent.parent)
        return tree if tree is not None else opened_root
    return None


def _listed_cases(path: Path) -> list[CaseRecords]:
    """The cases under an opened folder, with their record keys (to find and name records)."""
    out = []
    for ref in discover_cases(path):
        out.append(CaseRecords(os.path.relpath(ref.path, path), os.path.abspath(ref.path), record_key(ref.path, str(ref.layout))))
    return out


def find_journals(path: Path, workdir: Path | None = None) -> tuple[list[Path], Path | None, RecordIndex | None]:
    """(journal files, the opened folder when PATH was one, the index of its cases).

    An opened folder (a run root, a case, a tree): every journal of every work directory
    that may hold its cases' records (``journal.records.read_workdirs``: ``--workdir`` or
    ``<PATH>.eviscene-tui``, the ``*.eviscene-tui`` of the cases and their ancestors, the
    registry's), then its gate journal."""
    if path.is_file():
        return [path], None, None
    if not path.is_dir():
        return [], None, None
    if workdir is None:
        sidecar = supervised_journal_for_root(path)
        if path.parent.name == SUPERVISED_DIR and sidecar.is_file():
            return [sidecar], None, None
        found = journals_in_workdir(path)
        if found:
            return found + _gate_journals(path), None, None
    resolved = path.resolve()
    cases = _listed_cases(resolved)
    keys = [k for c in cases for k in c.key.keys]
    write = workdir if workdir is not None else default_workdir(resolved)
    dirs = read_workdirs([c.path for c in cases] or [resolved], write, keys, opened=resolved)
    journals = [j for d in dirs for j in journals_in_workdir(d)]
    return journals + _gate_journals(path), resolved, RecordIndex(cases, opened=resolved)


def _rows(journal: Path, opened_root: Path | None, index: RecordIndex | None = None, broken_at: int | None = None) -> list[dict[str, Any]]:
    events, _bad = parse_journal_bytes(journal.read_bytes() if journal.is_file() else b"")
    base = _base_for(journal, opened_root)
    workdir = journal.parent.parent
    gate_root = base if journal.name == GATE_JOURNAL and journal.parent.name.endswith(GATE_SUFFIX) else None
    rows = []
    for decision in fold(events).decisions:
        row = decision.row()
        row["journal"] = str(journal)
        hit = index.resolve(row["case"], workdir) if index is not None else None
        row["case_path"] = os.path.relpath(hit.path, opened_root) if hit is not None and opened_root is not None else None
        # a record key's evidence is relative to the case folder (journal.review)
        where = Path(hit.path) if hit is not None and is_record_key(row["case"]) else base
        row["stale"] = bool(stale_paths(decision.event, where)) if where is not None and row["evidence"] else False
        seq = row.get("seq")
        row["untrusted"] = broken_at is not None and isinstance(seq, int) and seq >= broken_at
        row["step_used"] = _step_used(gate_root, row)
        rows.append(row)
    return rows


def _step_used(gate_root: Path | None, row: dict[str, Any]) -> int | None:
    """The step the driver localized a relocalized round at (gate journals only)."""
    if gate_root is None or row.get("action") != P.SPECS[P.RELOCALIZE].journal or type(row.get("round")) is not int:
        return None
    return used_step(gate_root, row["round"])


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return str(value)


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        raise UsageError(f"{args.path} does not exist")
    workdir = Path(args.workdir) if getattr(args, "workdir", None) else None
    if workdir is not None and not workdir.is_dir():
        raise UsageError(f"--workdir {args.workdir} is not a directory")
    journals, opened_root, index = find_journals(path, workdir)
    if not journals:
        where = str(workdir) if workdir is not None else str(default_workdir(path)) if path.is_dir() else str(path)
        print(
            f"eviscene-tui decisions: no decision journal found for {args.path} (looked in {where}; "
            "pass --workdir DIR if the app ran with one)",
            file=sys.stderr,
        )
        return 1
    reports = {j: verify_chain(j) for j in journals}
    broken = [r for r in reports.values() if not r.ok]
    if args.events:
        if broken:
            for r in broken:
                print(f"eviscene-tui decisions: journal {r.path}: the hash chain does not verify:", file=sys.stderr)
                for problem in r.problems[:20]:
                    print(f"  - {safe_text(problem, single_line=True)}", file=sys.stderr)
            return 1
        events: list[dict[str, Any]] = []
        for j in journals:
            evs, _ = parse_journal_bytes(j.read_bytes() if j.is_file() else b"")
            events.extend({"journal": str(j), **e} for e in evs)
        return _emit(args, events, EVENT_FIELDS, reports)
    rows = [row for j in journals for row in _rows(j, opened_root, index, reports[j].broken_at)]
    missing = {j: unjournaled(j.parent) for j in journals if j.name == GATE_JOURNAL and j.parent.name.endswith(GATE_SUFFIX)}
    code = _emit(args, rows, ROW_FIELDS, reports, missing)
    for r in broken:
        print(f"eviscene-tui decisions: warning: journal {r.path} does not verify ({len(r.problems)} problem(s)); use --events for details", file=sys.stderr)
    for r in reports.values():
        if r.torn_tail is not None and r.torn_tail.offset not in r.acknowledged:
            print(f"eviscene-tui decisions: warning: journal {r.path} ends with {r.torn_tail.length} torn bytes (not a decision; "
                  "the next decide sets them aside)", file=sys.stderr)
    for journal, lines in missing.items():
        for line in lines:
            print(safe_text(f"eviscene-tui decisions: journal {journal} lacks a decision: {line}", single_line=True), file=sys.stderr)
    return 1 if broken or any(missing.values()) else code


def _emit(args: argparse.Namespace, items: list[dict[str, Any]], fields: tuple[str, ...], reports: dict,
          missing: dict[Path, list[str]] | None = None) -> int:
    if args.json:
        doc = {
            "journals": [r.as_dict() | {"missing_from_journal": (missing or {}).get(Path(r.path), [])} for r in reports.values()],
            ("events" if args.events else "decisions"): items,
        }
        sys.stdout.buffer.write(terminal_json(doc, indent=True) + b"\n")
        return 0
    if args.csv:
        tty = sys.stdout.isatty()
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(fields)
        for item in items:
            w.writerow([csv_cell(_cell(item.get(f)), to_terminal=tty) for f in fields])
        sys.stdout.write(buf.getvalue())
        return 0
    # human table (terminal output: every value through safe_text)
    if not items:
        print("no decisions recorded")
        return 0
    if args.events:
        for e in items:
            t = e.get("target") or {}
            print(safe_text(f"{e.get('seq'):>4} {e.get('ts')} {e.get('operator')} {e.get('action')} case={t.get('case')} round={t.get('round')} {e.get('reason')}", single_line=True))
    else:
        print_table(items)
    total = len(items)
    print(f"{total} {'event' if args.events else 'decision'}{'s' if total != 1 else ''} in {len(reports)} journal(s)")
    return 0


TABLE_COLUMNS = (("seq", ">"), ("ts", "<"), ("operator", "<"), ("action", "<"), ("case", "<"), ("rnd", ">"), ("step", ">"), ("label", "<"),
                 ("status", "<"), ("reason", "<"))


def print_table(items: list[dict[str, Any]]) -> None:
    """Folded decisions as an aligned table: every column as wide as its longest value
    (the case whole, the triage label in its own column), the reason last."""
    rows = []
    for r in items:
        status = _cell(r.get("status")) + (" STALE" if r.get("stale") else "") + (" BROKEN" if r.get("untrusted") else "")
        case = r.get("case_path") or r.get("case")  # the folder under PATH when the record key names a listed case
        step = _cell(r.get("step_index"))
        if r.get("step_used") is not None and r.get("step_used") != r.get("step_index"):
            step = f"{step}\u2192{r['step_used']}"
        values = (r.get("seq"), r.get("ts"), r.get("operator"), r.get("action"), case, r.get("round"), step, r.get("label"), status,
                  r.get("reason"))
        rows.append([safe_text(_cell(v), single_line=True, limit=200) for v in values])
    titles = [name for name, _ in TABLE_COLUMNS]
    widths = [max([len(t)] + [len(row[i]) for row in rows]) for i, t in enumerate(titles)]
    last = len(TABLE_COLUMNS) - 1

    def line(cells: list[str]) -> str:
        parts = [c if i == last else (c.rjust(widths[i]) if TABLE_COLUMNS[i][1] == ">" else c.ljust(widths[i])) for i, c in enumerate(cells)]
        return "  ".join(parts).rstrip()

    print(line(titles))
    for row in rows:
        print(line(row))
