"""Live updates: a driver writing into an opened folder shows up within ~1 s
(real watchfiles watcher on directories), and torn lines are 'being written'
before they count as problems."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from ui_helpers import WatchProbe, copy_case, make_app, open_case, wait_for, wait_scan

CASE = "feedback-converged-3-rounds"


def _write(path: Path, data: bytes) -> None:
    """Write like the driver does for manifest.json: in place, not atomic."""
    with open(path, "wb") as fh:
        fh.write(data)


def add_round(case: Path, hint: str) -> int:
    rounds = sorted(p for p in (case / "rounds").iterdir() if p.name.startswith("round-"))
    last = rounds[-1]
    new_index = int(last.name.split("-")[1]) + 1
    new = case / "rounds" / f"round-{new_index:02d}"
    new.mkdir()
    root_rows = [orjson.loads(line) for line in (case / "repair_attempts.jsonl").read_bytes().split(b"\n") if line.strip()]
    row = dict(root_rows[-1])
    row["hint_record"] = dict(row.get("hint_record") or {}, text=hint)
    row["attempt_id"] = "psd-repair-hint:live-test"
    row["local_verification"] = {}
    row["accepted"] = False
    line = orjson.dumps(row, option=orjson.OPT_SORT_KEYS) + b"\n"
    _write(new / "manifest.json", orjson.dumps({"schema_version": "ifv-psd-repair-driver-result-v1", "status": "generated", "candidate_count": 1, "accepted_count": 0, "pending_hinted_episode_count": 1}))
    _write(new / "repair_attempts.jsonl", line)
    with open(case / "repair_attempts.jsonl", "ab") as fh:
        fh.write(line)
    manifest = orjson.loads((case / "manifest.json").read_bytes())
    manifest["status"] = "searching"
    _write(case / "manifest.json", orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
    return new_index


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
async def test_new_round_attempt_and_status_appear_while_open(tmp_path_factory, tmp_path: Path, poll: bool) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    case = copy_case(tmp_path_factory, CASE, root)
    app = make_app(root, watch=True, poll=poll)
    probe = WatchProbe(root)
    async with app.run_test(size=(100, 40), message_hook=probe.hook) as pilot:
        screen = await open_case(pilot, app, CASE)
        await probe.live(pilot)
        before = app.store.get(CASE)
        index = add_round(case, "LIVE-HINT: reread the caption before searching")
        assert await wait_for(
            pilot,
            # the manifest is written last: its status says the whole round is in
            lambda: (row := app.store.get(CASE)) is not None and row.status == "searching",
        ), "runs row did not update"
        row = app.store.get(CASE)
        assert row.rounds == before.rounds + 1 and row.attempts == before.attempts + 1
        assert await wait_for(pilot, lambda: f"Round {index:02d}" in str(screen.query_one("#rounds-doc").content), 8)
        doc = str(screen.query_one("#rounds-doc").content)
        assert "LIVE-HINT: reread the caption" in doc
        assert "searching" in str(screen.query_one("#case-title").content)
        # a new case copied into the folder appears too
        copy_case(tmp_path_factory, "single-generating", root)
        assert await wait_for(pilot, lambda: app.store.get("single-generating") is not None, 8)


async def test_torn_line_is_being_written_then_a_problem(tmp_path_factory, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    case = copy_case(tmp_path_factory, CASE, root)
    app = make_app(root, watch=True, transient_grace=1.0)
    probe = WatchProbe(root)
    async with app.run_test(size=(100, 30), message_hook=probe.hook) as pilot:
        await wait_scan(pilot, app)
        await probe.live(pilot)
        problems_before = app.store.get(CASE).problems
        ledger = case / "repair_attempts.jsonl"
        with open(ledger, "ab") as fh:
            fh.write(b'{"schema_version": "ifv-psd-repair-attempt-v1", "hint_rec')
        assert await wait_for(pilot, lambda: app.store.get(CASE).being_written, 8), "torn tail not shown as being written"
        assert app.store.get(CASE).problems == problems_before
        # it stays torn: after the grace period it is a problem
        assert await wait_for(pilot, lambda: not app.store.get(CASE).being_written and app.store.get(CASE).problems > problems_before, 8)
        assert "jsonl_torn_line" in app.store.get(CASE).problem_codes


async def test_torn_line_completed_in_time_is_never_a_problem(tmp_path_factory, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    case = copy_case(tmp_path_factory, CASE, root)
    app = make_app(root, watch=True, transient_grace=3.0)
    probe = WatchProbe(root)
    async with app.run_test(size=(100, 30), message_hook=probe.hook) as pilot:
        await wait_scan(pilot, app)
        await probe.live(pilot)
        ledger = case / "repair_attempts.jsonl"
        rows = [line for line in ledger.read_bytes().split(b"\n") if line.strip()]
        before = app.store.get(CASE)
        half = len(rows[-1]) // 2
        with open(ledger, "ab") as fh:
            fh.write(rows[-1][:half])
        assert await wait_for(pilot, lambda: app.store.get(CASE).being_written, 8)
        with open(ledger, "ab") as fh:
            fh.write(rows[-1][half:] + b"\n")
        assert await wait_for(pilot, lambda: not app.store.get(CASE).being_written and app.store.get(CASE).attempts == before.attempts + 1, 8)
        assert app.store.get(CASE).problems == before.problems


async def test_polling_follows_the_open_case_itself(tmp_path_factory, tmp_path: Path, monkeypatch) -> None:
    """With --poll the watcher sees a file that keeps changing only once a second (it
    compares whole seconds), so the app looks at the open case's files itself: with a
    watcher that reports nothing at all, a status written into the open case still reaches
    its title; once the case is closed its files are no longer looked at."""
    import os

    import eviscene_tui.ui.app as app_module

    async def silent_watcher(*_paths, stop_event, **_kwargs):
        await stop_event.wait()
        return
        yield  # an async generator that never reports a change

    monkeypatch.setattr(app_module, "awatch", silent_watcher)
    root = tmp_path / "runs"
    root.mkdir()
    case = copy_case(tmp_path_factory, CASE, root)
    app = make_app(root, watch=True, poll=True)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_case(pilot, app, CASE)
        assert await wait_for(pilot, lambda: app.watch_polling and os.path.abspath(case) in app.open_cases)
        manifest = orjson.loads((case / "manifest.json").read_bytes())
        manifest["status"] = "polled-status"
        _write(case / "manifest.json", orjson.dumps(manifest, option=orjson.OPT_INDENT_2) + b"\n")
        assert await wait_for(pilot, lambda: "polled-status" in str(screen.query_one("#case-title").content), 8)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not app.open_cases)
