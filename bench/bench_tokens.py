"""Token inspector figures (printed, never asserted), measured in the WHOLE app.

A generated case whose localized failure step holds a 1,000,000-id ``policy_token_capture``
(prompt with image-pad runs + a completion with logprobs), its source trace outside the case
root (``<root>/inputs/<case>/trace.json``, recorded by an absolute cluster path), the tiny
tokenizer as the opened folder's ``tokenizer.json``. Through Pilot, with the app's own screens:

- ``k`` on the failure step -> tokens painted (goal < 0.3 s): from the key press to the end
  of the first frame in which the token view paints its rows (the paint is seen by wrapping
  the view's ``render_line`` in this benchmark, the frame's end by ``bench/frames.py``, which
  also charges it a terminal's encoding; nothing in the app measures itself);
- page scroll (goal < 16 ms): from a ``pagedown`` key press to the frame that paints the
  new page, grid and flowing view;
- ``f`` (grid -> flowing text) -> flowing text painted, in the middle of the capture (the
  view opens as a grid: ``k`` then ``f`` is what an operator who prefers text waits for);
- a text search over all 1,000,000 ids (worker, progress in the status line).

Generated data is cached under ``$EVISCENE_BENCH_DIR`` (default ``/tmp/eviscene-bench``).
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
from pathlib import Path

from bench.frames import FrameClock, frame_clock

BENCH_DIR = Path(os.environ.get("EVISCENE_BENCH_DIR", "/tmp/eviscene-bench"))
N_IDS = int(os.environ.get("EVISCENE_BENCH_TOKEN_IDS", "1000000"))


def _case() -> tuple[Path, int]:
    """A case root (and its failure step index) whose failure step holds an N_IDS capture."""
    import orjson

    from eviscene_tui.samples import synthetic
    from eviscene_tui.tokens import tiny

    root = BENCH_DIR / f"tokens-{N_IDS}"
    case = root / "tokens-case"
    marker = root / ".info.json"
    if marker.exists():
        return case, orjson.loads(marker.read_bytes())["failure"]
    if root.exists():
        import shutil

        shutil.rmtree(root)
    case.mkdir(parents=True)
    info = synthetic.make_big_case(case, 4_000_000)
    failure = info["failure_step_index"]
    trace_path = Path(info["path"])
    doc = orjson.loads(trace_path.read_bytes())
    ids = synthetic.make_big_capture_ids(N_IDS - 2000)
    completion = tiny.encode(" The caption date does not match the claim, so the photo is older.") * 150
    completion = completion[:2000]
    cap = doc["state"]["all_steps"][failure]["metadata"]["policy_token_capture"]
    cap.update(prompt_token_ids=ids, completion_token_ids=completion,
               completion_logprobs=[-0.05 * (i % 40) for i in range(len(completion))], status="complete", missing=[])
    # the driver's input lives outside the case root (where --trace pointed), recorded by an
    # absolute path on the cluster that wrote the run
    trace_path.unlink()
    outside = root / "inputs" / case.name / "trace.json"
    outside.parent.mkdir(parents=True, exist_ok=True)  # the synthetic case may have put inputs there
    outside.write_bytes(orjson.dumps(doc))
    fake = f"{synthetic.FAKE_ROOT}/{case.name}"
    config = {"trace": {"path": f"{synthetic.FAKE_ROOT}/inputs/{case.name}/trace.json", "sha256": synthetic._sha_file(outside)},
              "output_dir": fake, "search_mode": "single", "policy_model": synthetic.PROFILE_ID, "hint_count": 1}
    for name, data in synthetic.encode_bound(Path("run-inputs.json"), config, {"status": "initialized"}).items():
        (case / name).write_bytes(data)
    manifest = orjson.loads((case / "manifest.json").read_bytes())
    manifest["trace"] = config["trace"]["path"]
    (case / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    (root / "tokenizer.json").write_text(tiny.tiny_tokenizer_json(), encoding="utf-8")
    marker.write_bytes(orjson.dumps({"failure": failure}))
    return case, failure


def _row_key(table, case: Path) -> str | None:
    """The runs-table key of the row that opens ``case`` (None while the table lacks it)."""
    want = case.resolve()
    for row in table.rows:
        path = getattr(row.ref, "path", None)
        if path is not None and Path(path).resolve() == want:
            return row.key
    return None


async def _measure(case: Path, failure: int) -> dict[str, object]:
    with frame_clock() as frames:
        return await _measure_frames(case, failure, frames)


async def _measure_frames(case: Path, failure: int, frames: FrameClock) -> dict[str, object]:
    import argparse

    from eviscene_tui.options import AppOptions
    from eviscene_tui.settings import Settings
    from eviscene_tui.ui.app import EvisceneApp
    from eviscene_tui.ui.screens.case import CaseScreen
    from eviscene_tui.ui.screens.tokens import TokenScreen
    from eviscene_tui.ui.widgets.runs_table import RunsTable
    from eviscene_tui.ui.widgets.token_view import TokenView
    from eviscene_tui.ui.widgets.trace_view import TraceView
    from eviscene_tui.ui import gc_hold

    painted: list[tuple[float, int, str]] = []  # (time, scroll y, mode) of each token-view line paint
    real_render_line = TokenView.render_line
    wake = asyncio.Event()

    def render_line(self: TokenView, y: int):  # the benchmark's eye on the screen
        strip = real_render_line(self, y)
        if self.id == "token-view" and self.data is not None and (self.rows is not None or self.flow is not None):
            painted.append((time.perf_counter(), self.scroll_offset.y, self.mode))
            wake.set()
        return strip

    TokenView.render_line = render_line  # type: ignore[method-assign]  # a test double
    async def until(cond, timeout: float = 120.0) -> None:
        """Wait for ``cond``, woken by each paint (no busy polling competing for the CPU)."""
        end = time.perf_counter() + timeout
        while not cond():
            if time.perf_counter() > end:
                raise RuntimeError("benchmark condition not reached")
            wake.clear()
            try:
                await asyncio.wait_for(wake.wait(), timeout=0.05)
            except asyncio.TimeoutError:
                pass

    def painted_after(t0: float, *, y: int | None = None, mode: str | None = None) -> float | None:
        """From ``t0`` to the end of the frame that painted the view's rows (at scroll ``y``,
        in ``mode``): the whole app's frame, encoded as for a terminal (bench/frames.py)."""
        frame = frame_painted(t0, y=y, mode=mode)
        return None if frame is None else frame[0] - t0

    def frame_painted(t0: float, *, y: int | None = None, mode: str | None = None) -> tuple[float, float] | None:
        for t, sy, m in painted:
            if t >= t0 and (y is None or sy == y) and (mode is None or m == mode):
                return frames.after(t)
        return None

    def cpu_after(t0: float, c0: float, *, y: int | None = None) -> float:
        frame = frame_painted(t0, y=y)
        return float("nan") if frame is None else frame[1] - c0

    out: dict[str, object] = {}
    args = argparse.Namespace(theme=None, poll=False, operator="bench", workdir=None, config=None)
    app = EvisceneApp(AppOptions.from_args(case.parent, args, settings=Settings()), watch=False)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await until(lambda: app.scan_seconds is not None)
            table = app.screen.query_one(RunsTable)
            # the row's key is relative to the tree that holds the opened folder (the bench
            # directory holds other benchmarks' cases, so that tree may be the bench
            # directory itself): find the row by the case's path, once the table shows it
            await until(lambda: _row_key(table, case) is not None, 30)
            key = _row_key(table, case)
            if key is None or not table.select_key(key):
                raise RuntimeError("the benchmark case is not in the runs table")
            await pilot.pause()
            await pilot.press("enter")
            await until(lambda: isinstance(app.screen, CaseScreen) and app.screen.trace_rows is not None)
            case_screen = app.screen
            await pilot.pause()
            tv = case_screen.query_one(TraceView)
            out["cursor_on_failure"] = tv.cursor == failure
            samples: list[float] = []
            cpus: list[float] = []
            for attempt in range(3):
                painted.clear()
                t0, c0 = time.perf_counter(), time.process_time()
                app.simulate_key("k")
                await until(lambda t0=t0: painted_after(t0) is not None)
                samples.append(painted_after(t0) or 0.0)
                cpus.append(cpu_after(t0, c0))
                screen = app.screen
                assert isinstance(screen, TokenScreen)
                await until(lambda screen=screen: screen.data is not None and screen.query_one("#token-view", TokenView).rows is not None)
                await pilot.pause()
                if attempt < 2:
                    await pilot.press("escape")
                    await until(lambda: app.screen is case_screen)
                    await pilot.pause()
            out["first_paint"] = samples
            out["first_paint_cpu"] = cpus
            view = screen.query_one("#token-view", TokenView)
            out["ids"] = len(view.data.ids) if view.data is not None else 0

            async def pages(n: int, name: str) -> None:
                await pilot.press("pagedown")  # the first one moves the cursor to the bottom row only
                await pilot.pause()
                got, cpus = [], []
                for _ in range(n):
                    before = view.scroll_offset.y
                    painted.clear()
                    t0, c0 = time.perf_counter(), time.process_time()
                    app.simulate_key("pagedown")
                    await until(lambda before=before, t0=t0: view.scroll_offset.y != before and painted_after(t0, y=view.scroll_offset.y) is not None, 10)
                    y = view.scroll_offset.y
                    got.append(painted_after(t0, y=y) or 0.0)
                    cpus.append(cpu_after(t0, c0, y=y))
                    await pilot.pause()
                out[name] = got
                out[name + "_cpu"] = cpus

            # full garbage collections (generation 2) during the page scrolls, timed
            full: list[float] = []
            started: list[float] = []

            def on_gc(phase: str, info: dict) -> None:
                if info.get("generation") == 2:
                    if phase == "start":
                        started[:] = [time.perf_counter()]
                    elif started:
                        full.append(time.perf_counter() - started[0])

            gc.callbacks.append(on_gc)
            await pages(15, "grid_pages")
            view.jump_to_offset(len(view.data.ids) // 2)
            await pilot.pause()
            painted.clear()
            t0 = time.perf_counter()
            app.simulate_key("f")
            await until(lambda: painted_after(t0, mode="flow") is not None)
            out["flow_toggle"] = painted_after(t0, mode="flow")
            await pilot.pause()
            await pages(15, "flow_pages")
            out["gc_full_pages"] = list(full)
            # the full collection deferred during the scrolls runs once the operator pauses
            # (when one is owed: the scrolls may not have made enough garbage for one)
            out["gc_pause"] = None
            if gc_hold.full_collection_pending():
                deferred = app.deferred_collections
                t0 = time.perf_counter()
                await until(lambda: app.deferred_collections > deferred, 10)
                out["gc_pause"] = (time.perf_counter() - t0, full[-1] if len(full) > len(out["gc_full_pages"]) else float("nan"))
            gc.callbacks.remove(on_gc)
            t0 = time.perf_counter()
            gc.collect()  # what one full collection costs while the capture is shown
            out["gc_collect"] = time.perf_counter() - t0
            # a text search that matches nothing: a scan of every id, in a worker
            t0 = time.perf_counter()
            screen.search("words that appear nowhere in the capture")
            await until(lambda: "no match" in str(screen.query_one("#tokens-status").render()), 120)
            out["search"] = time.perf_counter() - t0
    finally:
        TokenView.render_line = real_render_line  # type: ignore[method-assign]  # a test double
    return out


def _pages(got: dict, name: str) -> str:
    wall, cpu = got[name], got[name + "_cpu"]
    return (f"median {statistics.median(wall) * 1000:.1f} ms, max {max(wall) * 1000:.1f} ms"
            f" (process CPU median {statistics.median(cpu) * 1000:.1f} ms)")


def run() -> list[tuple[str, str]]:
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    case, failure = _case()
    prep = time.perf_counter() - t
    got = asyncio.run(_measure(case, failure))
    n = got["ids"]
    first = got["first_paint"]
    rows = [
        (f"tokens: whole app, k on the failure step -> {n:,} ids painted (goal < 0.3 s)",
         f"first {first[0] * 1000:.0f} ms, again {min(first[1:]) * 1000:.0f} ms (process CPU {min(got['first_paint_cpu']) * 1000:.0f} ms)"
         + (f" (data generated in {prep:.0f} s)" if prep > 1 else "")
         + ("" if got["cursor_on_failure"] else " (trace cursor NOT on the failure step)")),
        ("tokens: page scroll, grid, key press -> page painted (goal < 16 ms)", _pages(got, "grid_pages")),
        ("tokens: f -> flowing text painted (mid-capture)", f"{got['flow_toggle'] * 1000:.0f} ms"),
        ("tokens: page scroll, flowing text, key press -> page painted (goal < 16 ms)", _pages(got, "flow_pages")),
        ("tokens: full garbage collections during those 30 page scrolls / one gc.collect() with the capture shown",
         f"{len(got['gc_full_pages'])} ({max(got['gc_full_pages'], default=0) * 1000:.0f} ms max)"
         f" / {got['gc_collect'] * 1000:.0f} ms"),
        ("tokens: the deferred full collection, run in the pause after the scrolls: after / taking",
         f"{got['gc_pause'][0]:.2f} s / {got['gc_pause'][1] * 1000:.0f} ms" if got["gc_pause"] else "none was owed"),
        (f"tokens: text search with no match over {n:,} ids (worker, progress shown)", f"{got['search']:.2f} s"),
    ]
    return rows


if __name__ == "__main__":
    for label, figure in run():
        print(f"{label}: {figure}")
