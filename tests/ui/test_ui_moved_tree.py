"""The app on a tree written at one path and moved to another (the original removed),
its inputs beside the case roots: the case screen paints the source trace's failure
step, Compare and the token inspector's source captures work, the Integrity tab says
where each input was found; the escape case never shows the file it points at."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Static
from ui_helpers import make_app, open_case, screen_text, wait_for

from conftest import generate_samples

from eviscene_tui.scaffold.samples import copy_case
from eviscene_tui.scaffold.samples.stories import FLOOD
from eviscene_tui.ui.widgets.trace_view import TraceView


def moved_samples(tmp_path: Path) -> Path:
    written = tmp_path / "cluster" / "exp" / "sample_runs"
    generate_samples(written, base=str(written))
    moved = tmp_path / "laptop" / "copy" / "sample_runs"
    moved.parent.mkdir(parents=True)
    shutil.move(str(written), str(moved))
    shutil.rmtree(tmp_path / "cluster")
    return moved


async def test_moved_tree_trace_compare_tokens_and_provenance(tmp_path: Path) -> None:
    from eviscene_tui.ui.screens import tokens as tokens_screen
    from eviscene_tui.ui.screens.tokens import TokenScreen

    root = moved_samples(tmp_path)
    app = make_app(root)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        failure = screen.view.failure_index
        assert failure is not None and screen.trace_rows is not None and screen.trace_rows.failure_index == failure
        tv = screen.query_one(TraceView)
        assert await wait_for(pilot, lambda: tv.cursor == failure and tv.probes.failure_painted_at is not None)
        assert Path(screen.trace.path) == root / "inputs" / "feedback-converged-3-rounds" / "trace.json"
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        status = str(screen.query_one("#trace-status", Static).content)
        assert f"failure at {failure}" in status and "trace: outside root, moved tree, sha256 \u2713" in status
        assert screen.integrity == []  # nothing wrong with a complete moved copy
        # Compare: the source failure step against the teacher's repaired step
        await pilot.press("4")
        assert await wait_for(pilot, lambda: "waiting for the trace" not in str(screen.query_one("#compare-left").content), 10)
        left = str(screen.query_one("#compare-left").content)
        right = str(screen.query_one("#compare-right").content)
        assert f"step {failure}" in left and right.strip()
        # Integrity: where each input was found
        await pilot.press("5")
        await pilot.pause()
        doc = str(screen.query_one("#integrity-doc").content)
        assert "source trace: " + str(root / "inputs" / "feedback-converged-3-rounds" / "trace.json") in doc
        assert "found by moved tree (" in doc and str(tmp_path / "cluster") in doc
        # the token inspector on the failure step reads the source capture from the moved trace
        await pilot.press("1")
        await pilot.pause()
        await pilot.press("k")
        assert await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen) and app.screen.loaded_key is not None, 20)
        assert app.screen.loaded_key == f"step:{failure}" and app.screen.data.ids
        # the decoder is resolved with the serving profile the run bound, found in the moved tree
        profile, bases = tokens_screen._profile_and_bases(app.screen.case, app.screen.options)
        assert profile == root / "inputs" / "feedback-converged-3-rounds" / "serving-profile.json"
        assert bases[0] == profile.parent


async def test_moved_copy_without_inputs_opens_with_clear_messages(tmp_path: Path) -> None:
    root = moved_samples(tmp_path)
    shutil.rmtree(root / "inputs" / "single-copied-without-inputs", ignore_errors=True)
    app = make_app(root)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_case(pilot, app, "single-copied-without-inputs")
        assert await wait_for(pilot, lambda: "source trace unavailable" in str(screen.query_one("#trace-status").content), 10)
        # the trace area itself says what is missing, where it was recorded and looked for
        missing = str(screen.query_one("#trace-missing", Static).content)
        assert "source trace not found" in missing and "records it at" in missing and "looked for" in missing
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        assert {code for code, _, _ in screen.integrity} == {"missing_artifact"}
        await pilot.press("3")  # the run's own files still show: the run's head line and its attempt
        assert await wait_for(pilot, lambda: screen.query("#rounds-doc") and "Run  generated" in str(screen.query_one("#rounds-doc").content), 10)
        rounds = str(screen.query_one("#rounds-doc").content)
        assert "attempt hint-00" in rounds and "ACCEPTED" in rounds


async def test_escaping_episode_path_never_shows_the_file_it_names(tmp_path: Path) -> None:
    root = moved_samples(tmp_path)
    app = make_app(root)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await open_case(pilot, app, "damaged")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 20)
        assert any(code == "path_outside_root" for code, _, _ in screen.integrity)
        await pilot.press("v")  # privileged material revealed: still only the case's own
        seen = []
        for tab in ("1", "2", "3", "4", "5"):
            await pilot.press(tab)
            await pilot.pause(0.2)
            seen.append(screen_text(app))
            seen.extend(str(w.content) for w in screen.query(Static))
        # the escaping path names another case's private context (the FLOOD story's fact)
        assert not any(FLOOD.private_fact in text for text in seen)


async def test_feedback_search_copied_without_inputs_finishes_its_integrity_check(tmp_path: Path) -> None:
    """A multi-round search whose inputs were left behind: the full check ends (the badge
    shows the missing inputs) instead of "checking" forever."""
    samples = tmp_path / "samples"
    generate_samples(samples, base="/data/eviscene/sample_runs", cases=["feedback-converged-3-rounds"])
    root = tmp_path / "a"
    copy_case(samples, "feedback-converged-3-rounds", root, with_inputs=False)
    app = make_app(root)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 30)
        assert screen.integrity and {code for code, _, _ in screen.integrity} == {"missing_artifact"}
        await pilot.press("5")
        await pilot.pause()
        assert "running the full integrity check" not in str(screen.query_one("#integrity-doc").content)


async def test_an_integrity_check_that_raises_is_shown_not_waited_for(tmp_path: Path, monkeypatch, check_in_thread) -> None:
    """A full check that raises something unexpected ends as an "error" row on the
    Integrity tab (the badge counts it), not as "running the full integrity check" forever."""
    from eviscene_tui.state import case_check

    def broken(*_a, **_kw):
        raise KeyError("no such binding")

    monkeypatch.setattr(case_check, "checked_case", broken)
    samples = tmp_path / "samples"
    generate_samples(samples, base="/data/eviscene/sample_runs", cases=["feedback-converged-3-rounds"])
    root = tmp_path / "a"
    copy_case(samples, "feedback-converged-3-rounds", root)
    app = make_app(root)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_case(pilot, app, "feedback-converged-3-rounds")
        assert await wait_for(pilot, lambda: screen.integrity is not None, 30)
        assert [code for code, _, _ in screen.integrity] == ["error"]
        assert "integrity check failed: KeyError" in screen.integrity[0][2]
        await pilot.press("5")
        await pilot.pause()
        doc = str(screen.query_one("#integrity-doc").content)
        assert "running the full integrity check" not in doc and "integrity check failed: KeyError" in doc
