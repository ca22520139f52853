"""The coalescing of live re-reads (KeyThrottle), the stat-based look for new cases used
with --poll (EntryPoller) and for changed files of the open cases (OpenCasePoller), on
real folders; times are given, never slept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.state.rows import CaseRow
from eviscene_tui.state.scan import CaseIndex, EntryPoller, KeyThrottle, OpenCasePoller


def test_throttle_lets_the_first_change_through_and_holds_the_burst() -> None:
    t = KeyThrottle(1.0)
    assert t.admit({"a"}, 10.0) == {"a"}
    # a burst within the gap: held, nothing due before the gap ends
    assert t.admit({"a"}, 10.2) == set()
    assert t.admit({"a", "b"}, 10.5) == {"b"}
    assert t.due(10.9) == set()
    assert 0.0 < t.wait(10.9, 0.25) <= 0.1 + 1e-9
    # the trailing re-read: once, when the gap ends, so the last state is shown
    assert t.due(11.0) == {"a"}
    assert t.due(11.5) == set()
    assert t.wait(11.5, 0.25) == 0.25
    # quiet for a gap: the next change goes through at once again
    assert t.admit({"a"}, 12.1) == {"a"}


def _case(folder: Path, name: str) -> Path:
    case = folder / name
    case.mkdir(parents=True)
    (case / "manifest.json").write_text("{}", encoding="utf-8")
    return case


def test_entry_poller_reports_new_entries_until_they_are_cases(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    wrapper_repairs = root / "wrapper" / "repairs"
    _case(root, "old")
    _case(wrapper_repairs, "k1")
    known: set[str] = {str(root / "old"), str(wrapper_repairs / "k1")}
    poller = EntryPoller(str(root), settle=3.0)
    folders = {str(root), str(wrapper_repairs), str(tmp_path)}  # a folder outside the root is never looked at
    assert poller.tick(folders, 0.0, known.__contains__) == set()  # the first look only learns
    assert poller.tick(folders, 0.1, known.__contains__) == set()  # nothing changed
    new = root / "new"
    new.mkdir()  # a copy under way: not a case yet
    assert poller.tick(folders, 0.2, known.__contains__) == {str(new)}
    # offered again at each tick while it is not a known case (the copy goes on)
    (new / "manifest.json").write_text("{}", encoding="utf-8")
    assert poller.tick(folders, 0.3, known.__contains__) == {str(new)}
    known.add(str(new))
    assert poller.tick(folders, 0.4, known.__contains__) == set()
    # a new case in a wrapper's repairs/ (a folder that holds cases)
    k2 = _case(wrapper_repairs, "k2")
    assert poller.tick(folders, 0.5, known.__contains__) == {str(k2)}
    # an entry that never becomes a case is given up after `settle` seconds; one removed at once
    junk = root / "junk"
    junk.mkdir()
    assert poller.tick(folders, 1.0, lambda p: p != str(junk) and p != str(k2)) == {str(junk), str(k2)}
    shutil.rmtree(k2)
    assert poller.tick(folders, 2.0, lambda p: p != str(junk)) == {str(junk)}
    assert poller.tick(folders, 4.1, lambda p: p != str(junk)) == set()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert poller.tick(folders, 4.2, lambda p: False) == set()


def test_case_index_folders_follow_the_cases(tmp_path: Path) -> None:
    index = CaseIndex()
    assert index.folders() == frozenset()
    a = tmp_path / "runs" / "a"
    b = tmp_path / "runs" / "w" / "repairs" / "b"
    index.add(CaseRow(key="a", ref=CaseRef(path=a, layout=Layout.SINGLE_RUN)))
    assert index.folders() == {str(a.parent)}
    index.add(CaseRow(key="w/b", ref=CaseRef(path=b, layout=Layout.SINGLE_RUN)))
    assert index.folders() == {str(a.parent), str(b.parent)}
    index.remove("a")
    assert index.folders() == {str(b.parent)}


def _touch_ns(path: Path, data: bytes, mtime_ns: int) -> None:
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_open_case_poller_sees_changes_within_one_second(tmp_path: Path) -> None:
    """What the polling watcher misses (it compares whole seconds): a file appended to, or
    rewritten to the same size, twice within a second; and new and removed files."""
    case = _case(tmp_path / "runs", "open")
    events = case / "runtime" / "events.jsonl"
    events.parent.mkdir()
    second = 1_700_000_000 * 10**9
    _touch_ns(events, b'{"n": 1}\n', second + 100)
    _touch_ns(case / "manifest.json", b'{"status": "a"}', second + 100)
    poller = OpenCasePoller(min_interval=0.2, budget=1e9)
    root = str(case)
    assert poller.tick([root], 10.0) == set()  # the first walk records what is there
    _touch_ns(events, b'{"n": 1}\n{"n": 2}\n', second + 200)  # appended, same second
    _touch_ns(case / "manifest.json", b'{"status": "b"}', second + 300)  # same size, same second
    assert poller.tick([root], 10.1) == set()  # not due yet (min_interval)
    assert poller.tick([root], 10.2) == {str(events), str(case / "manifest.json")}
    assert poller.tick([root], 10.4) == set()  # nothing changed since
    (case / "rounds").mkdir()
    (case / "rounds" / "round-01.json").write_bytes(b"{}")
    events.unlink()
    assert poller.tick([root], 10.6) == {str(case / "rounds" / "round-01.json"), str(events)}


def test_open_case_poller_paces_big_walks(tmp_path: Path) -> None:
    case = _case(tmp_path / "runs", "open")
    root = str(case)
    poller = OpenCasePoller(min_interval=0.2, budget=1e-9)  # any walk "takes" far longer than its budget
    assert poller.tick([root], 10.0) == set()
    (case / "manifest.json").write_bytes(b'{"status": "changed"}')
    assert poller.tick([root], 10.5) == set()  # the next walk waits took/budget, not min_interval


def test_open_case_poller_forgets_closed_cases(tmp_path: Path) -> None:
    case = _case(tmp_path / "runs", "open")
    root = str(case)
    poller = OpenCasePoller(min_interval=0.2, budget=1e9)
    assert poller.tick([root], 10.0) == set()
    (case / "manifest.json").write_bytes(b'{"status": "changed while closed"}')
    assert poller.tick([], 10.5) == set()  # the case was closed: forgotten
    # opened again: a first walk again, which records what is there (a change made while it
    # was closed is read by the case screen's own first load, not reported as news)
    assert poller.tick([root], 11.0) == set()
    (case / "manifest.json").write_bytes(b'{"status": "changed once more"}')
    assert poller.tick([root], 11.5) == {str(case / "manifest.json")}
