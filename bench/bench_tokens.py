"""Token inspector figures (printed, never asserted), measured in the WHOLE app.

A generated case whose localized failure step holds a 1,000,000-id ``policy_token_capture``
(prompt with image-pad runs + a completion with logprobs), its source trace outside the case
root (``<root>/inputs/<case>/trace.json``, recorded by an absolute cluster path), the tiny
tokenizer as the opened folder's ``tokenizer.json``. Through Pilot, with the app's own screens:

- ``k`` on the failure step -> tokens painted (goal < 0.3 s): from the key press to the end
  of the first frame in which the token view paints its rows (the paint is seen by wrapping
  the view's ``render_line`` in this benchmark, the frame's end by ``bench/frames.py``, which
  also charges it a terminal's encoding; nothing in the app measures itself);
- the same busy ``k`` with the case's integrity check in its own niced process and on a thread
  of the app (switch ``check_process``), interleaved, with the app process's CPU;
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
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.frames import FrameClock, frame_clock

BENCH_DIR = Path(os.environ.get("EVISCENE_BENCH_DIR", "/tmp/eviscene-bench"))
N_IDS = int(os.environ.get("EVISCENE_BENCH_TOKEN_IDS", "1000000"))
#: seconds after the case painted its failure step at which k is pressed for the busy figure
BUSY_MOMENTS = (0.0, 0.5, 2.0)
PAGES = 8  # page-down keys per figure


def _case() -> tuple[Path, int]:
    """A case root (and its failure step index) whose failure step holds an N_IDS capture."""
    import orjson

    from eviscene_tui.scaffold.samples import synthetic
    from eviscene_tui.scaffold import tiny

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


async def _measure(case: Path, failure: int, reduced: bool = False) -> dict[str, object]:
    with frame_clock() as frames:
        return await _measure_frames(case, failure, frames, reduced)


async def _measure_frames(case: Path, failure: int, frames: FrameClock, reduced: bool) -> dict[str, object]:
    """Every token figure; ``reduced``: only the idle k and page scrolls (a run with a part of
    the performance layer switched off, see ``eviscene_tui/switches.py``)."""
    import argparse

    from eviscene_tui.options import AppOptions
    from eviscene_tui.settings import Settings
    from eviscene_tui.ui.app import EvisceneApp
    from eviscene_tui.ui.screens.case import CaseScreen
    from eviscene_tui.ui.screens.runs import RunsScreen
    from eviscene_tui.ui.screens.tokens import TokenScreen
    from eviscene_tui.ui.widgets.runs_table import RunsTable
    from eviscene_tui.ui.widgets.token_view import TokenView
    from eviscene_tui.ui.widgets.trace_view import TraceView
    from eviscene_tui import switches
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

    app: EvisceneApp | None = None
    scrolling = [False]  # a page series is running (full collections are counted only then)

    async def pages(view: TokenView, n: int, name: str) -> None:
        """``n`` page-down keys, each timed to the frame that painted the new page."""
        assert app is not None
        scrolling[0] = True
        got, cpus = [], []
        before = view.scroll_offset.y
        app.simulate_key("pagedown")  # the first one may move the cursor to the bottom row only
        await until(lambda: view.scroll_offset.y != before or view.cursor_offset > 0, 10)
        await asyncio.sleep(0.03)
        for _ in range(n):
            before = view.scroll_offset.y
            painted.clear()
            t0, c0 = time.perf_counter(), time.process_time()
            app.simulate_key("pagedown")
            await until(lambda before=before, t0=t0: view.scroll_offset.y != before and painted_after(t0, y=view.scroll_offset.y) is not None, 10)
            y = view.scroll_offset.y
            got.append(painted_after(t0, y=y) or 0.0)
            cpus.append(cpu_after(t0, c0, y=y))
            await asyncio.sleep(0.03)  # a key repeat's pace: the next key comes before the view is idle
        scrolling[0] = False
        out[name] = got
        out[name + "_cpu"] = cpus

    async def lean_pair(view: TokenView, name: str) -> None:
        """The same page keys with the lean view on and off, interleaved on, off, off, on
        (a drift of the machine's load falls on both alike): ``name`` + ``_on`` / ``_off``."""
        for lean in (True, False, False, True):
            switches.set_off("lean_token_view", not lean)
            view.refresh()
            await pilot.pause(0.5)
            await pages(view, PAGES, "pair")
            side = name + ("_on" if lean else "_off")
            out.setdefault(side, []).extend(out.pop("pair"))
            out.setdefault(side + "_cpu", []).extend(out.pop("pair_cpu"))
        switches.set_off("lean_token_view", False)
        view.refresh()
        await pilot.pause(0.5)

    out: dict[str, object] = {}
    args = argparse.Namespace(theme=None, poll=False, operator="bench", workdir=None, config=None)
    app = EvisceneApp(AppOptions.from_args(case.parent, args, settings=Settings()), watch=False)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await until(lambda: app.probes.scan_seconds is not None)
            table = app.screen.query_one(RunsTable)
            # the row's key is relative to the tree that holds the opened folder (the bench
            # directory holds other benchmarks' cases, so that tree may be the bench
            # directory itself): find the row by the case's path, once the table shows it
            await until(lambda: _row_key(table, case) is not None, 30)
            key = _row_key(table, case)

            async def open_case() -> tuple[CaseScreen, float]:
                """Enter on the case's row: the case screen and the end of the frame that painted its failure step."""
                if key is None or not table.select_key(key):
                    raise RuntimeError("the benchmark case is not in the runs table")
                await pilot.pause()
                await pilot.press("enter")
                await until(lambda: isinstance(app.screen, CaseScreen) and app.screen.trace_rows is not None
                            and app.screen.query_one(TraceView).probes.failure_painted_at is not None)
                screen = app.screen
                painted_at = screen.query_one(TraceView).probes.failure_painted_at
                frame = frames.after(painted_at)
                while frame is None:
                    await asyncio.sleep(0.001)
                    frame = frames.after(painted_at)
                return screen, frame[0]

            async def press_k(case_screen: CaseScreen) -> tuple[float, float, TokenScreen]:
                painted.clear()
                t0, c0 = time.perf_counter(), time.process_time()
                app.simulate_key("k")
                await until(lambda: painted_after(t0) is not None)
                took, cpu = painted_after(t0) or 0.0, cpu_after(t0, c0)
                screen = app.screen
                assert isinstance(screen, TokenScreen)
                return took, cpu, screen

            async def back_to_runs() -> None:
                while not isinstance(app.screen, RunsScreen):
                    await pilot.press("escape")
                    await pilot.pause()

            async def settled(case_screen: CaseScreen) -> None:
                """The case's background work done: every row filled, the integrity check answered."""
                await until(lambda: case_screen.trace_rows.filled() == case_screen.trace_rows.step_count
                            and case_screen.integrity is not None and not case_screen.session.integrity_running, 120)
                await pilot.pause(0.5)

            # busy: k at a moment the operator may choose after the failure step is painted, while
            # the case's trace fill, comparison and integrity check (hashing its trace) run
            busy: list[tuple[float, float, float]] = []
            for moment in () if reduced else BUSY_MOMENTS:
                case_screen, shown = await open_case()
                await asyncio.sleep(max(0.0, shown + moment - time.perf_counter()))
                took, cpu, screen = await press_k(case_screen)
                busy.append((moment, took, cpu))
                if moment == 0.0:
                    out["cursor_on_failure"] = case_screen.query_one(TraceView).cursor == failure
                    view = screen.query_one("#token-view", TokenView)
                    await until(lambda view=view: view.rows is not None)
                    # the token screen just painted, the case screen's work still running beneath it
                    await pages(view, PAGES, "grid_pages_busy")
                await back_to_runs()
            out["k_busy"] = busy
            # the same busy k (0 s after the paint) with the case's integrity check in its own
            # process and on a thread of the app, interleaved (a drift of the machine's load
            # falls on both alike); whether the check was still running when k was pressed
            check_pair: dict[bool, list[tuple[float, float, bool, float, float]]] = {True: [], False: []}
            for in_process in () if reduced else (True, False, False, True, True, False):
                switches.set_off("check_process", not in_process)
                await pilot.pause(0.5)
                t_open, c_open = time.perf_counter(), time.process_time()
                case_screen, shown = await open_case()
                opened, opened_cpu = shown - t_open, time.process_time() - c_open
                running = case_screen.session.integrity_running
                took, cpu, _screen = await press_k(case_screen)
                check_pair[in_process].append((took, cpu, running, opened, opened_cpu))
                await back_to_runs()
            switches.set_off("check_process", False)
            out["k_busy_check"] = check_pair
            # idle: the case settled first
            case_screen, _ = await open_case()
            await settled(case_screen)
            samples: list[float] = []
            cpus: list[float] = []
            for attempt in range(2):
                took, cpu, screen = await press_k(case_screen)
                samples.append(took)
                cpus.append(cpu)
                await until(lambda screen=screen: screen.data is not None and screen.query_one("#token-view", TokenView).rows is not None)
                await pilot.pause()
                if attempt == 0:
                    await pilot.press("escape")
                    await until(lambda: app.screen is case_screen)
                    await pilot.pause(0.5)
            out["first_paint"] = samples
            out["first_paint_cpu"] = cpus
            view = screen.query_one("#token-view", TokenView)
            out["ids"] = len(view.data.ids) if view.data is not None else 0

            # full garbage collections (generation 2), timed: those during the page scrolls
            # (not in the pauses between two series, where a deferred one is meant to run)
            full: list[float] = []
            during: list[float] = []
            started: list[float] = []

            def on_gc(phase: str, info: dict) -> None:
                if info.get("generation") == 2:
                    if phase == "start":
                        started[:] = [time.perf_counter()]
                    elif started:
                        full.append(time.perf_counter() - started[0])
                        if scrolling[0]:
                            during.append(full[-1])

            gc.callbacks.append(on_gc)
            await pilot.pause(1.0)
            await pages(view, PAGES, "grid_pages")
            if not reduced:  # the same pages drawn through Textual's own line pipeline and scrollbar
                await lean_pair(view, "grid_pages_lean")
            view.jump_to_offset(len(view.data.ids) // 2)
            await pilot.pause()
            painted.clear()
            t0 = time.perf_counter()
            app.simulate_key("f")
            await until(lambda: painted_after(t0, mode="flow") is not None)
            out["flow_toggle"] = painted_after(t0, mode="flow")
            await pages(view, PAGES, "flow_pages_busy")  # right after the flowing text painted
            await pilot.pause(1.0)
            await pages(view, PAGES, "flow_pages")
            if not reduced:
                await lean_pair(view, "flow_pages_lean")
            out["gc_full_pages"] = list(during)
            collections = len(full)
            if reduced:
                gc.callbacks.remove(on_gc)
                return out
            # the full collection deferred during the scrolls runs once the operator pauses
            # (when one is owed: the scrolls may not have made enough garbage for one)
            out["gc_pause"] = None
            if gc_hold.full_collection_pending():
                deferred = app.probes.deferred_collections
                t0 = time.perf_counter()
                await until(lambda: app.probes.deferred_collections > deferred, 10)
                out["gc_pause"] = (time.perf_counter() - t0, full[-1] if len(full) > collections else float("nan"))
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


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms"


def _pages(got: dict, name: str) -> str:
    """Idle and busy figures of one page-scroll series, side by side."""
    idle, busy = got[name], got[name + "_busy"]
    return (f"idle {_ms(idle)} (CPU median {statistics.median(got[name + '_cpu']) * 1000:.1f} ms) | "
            f"busy {_ms(busy)} (CPU median {statistics.median(got[name + '_busy_cpu']) * 1000:.1f} ms)")


def _check_pair(pair: dict) -> str:
    """Busy k with the case's integrity check in its process and on a thread: each k's wall
    and the app process's CPU from the key to the paint (the check's, on a thread, counted)."""

    def one(runs: list) -> str:
        walls = [run[0] for run in runs]
        cpus = [run[1] for run in runs]
        running = sum(1 for run in runs if run[2])
        opens = [run[3] for run in runs]
        open_cpus = [run[4] for run in runs]
        return (", ".join(f"{run[0] * 1000:.0f} ms (CPU {run[1] * 1000:.0f} ms)" for run in runs)
                + f"; best {min(walls) * 1000:.0f} ms, CPU median {statistics.median(cpus) * 1000:.0f} ms; check running at the key {running}/{len(runs)};"
                  f" Enter -> failure step painted before it: best {min(opens) * 1000:.0f} ms, CPU median {statistics.median(open_cpus) * 1000:.0f} ms")

    return f"process: {one(pair[True])} | thread: {one(pair[False])}"


def _lean(got: dict, name: str) -> str:
    """One on/off pair of page scrolls: wall and CPU medians, and what the part saves."""
    on, off = got[name + "_on"], got[name + "_off"]
    on_cpu, off_cpu = statistics.median(got[name + "_on_cpu"]), statistics.median(got[name + "_off_cpu"])
    wall = 1 - statistics.median(on) / statistics.median(off) if statistics.median(off) else float("nan")
    cpu = 1 - on_cpu / off_cpu if off_cpu else float("nan")
    return (f"on {_ms(on)} (CPU median {on_cpu * 1000:.1f} ms) | off {_ms(off)} (CPU median {off_cpu * 1000:.1f} ms):"
            f" on saves {wall * 100:.0f} % of the wall median, {cpu * 100:.0f} % of the CPU")


_REDUCED = """
import asyncio, json
from bench.bench_tokens import _case, _measure
case, failure = _case()
print(json.dumps(asyncio.run(_measure(case, failure, reduced=True))))
"""


def _reduced(off: str) -> dict:
    """The idle k and page scrolls in a fresh process with ``off`` switched off ("": none)."""
    env = {**os.environ, "EVISCENE_TUI_OFF": off}
    out = subprocess.run([sys.executable, "-c", _REDUCED], capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        return {"error": ((out.stderr or out.stdout).strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _gc_pair(on: dict, off: dict) -> str:
    if "error" in on or "error" in off:
        return "failed: " + str(on.get("error") or off.get("error"))

    def one(got: dict) -> str:
        pages = got["grid_pages"] + got["flow_pages"]
        return (f"pages max {max(pages) * 1000:.0f} ms, median {statistics.median(pages) * 1000:.1f} ms,"
                f" {len(got['gc_full_pages'])} full collections during them ({max(got['gc_full_pages'], default=0) * 1000:.0f} ms max)")

    return f"on: {one(on)} | off: {one(off)}"


def run() -> list[tuple[str, str]]:
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    case, failure = _case()
    prep = time.perf_counter() - t
    got = asyncio.run(_measure(case, failure))
    n = got["ids"]
    first = got["first_paint"]
    busy = got["k_busy"]
    worst = max(took for _m, took, _c in busy)
    rows = [
        (f"tokens: k on the failure step -> {n:,} ids painted, idle | busy (goal < 0.3 s at any moment)",
         f"idle {first[0] * 1000:.0f} ms, again {first[1] * 1000:.0f} ms (CPU {min(got['first_paint_cpu']) * 1000:.0f} ms) | busy "
         + ", ".join(f"{took * 1000:.0f} ms (CPU {cpu * 1000:.0f} ms) {moment:g} s after the paint" for moment, took, cpu in busy)
         + f" (worst {worst * 1000:.0f} ms)"
         + (f" (data generated in {prep:.0f} s)" if prep > 1 else "")
         + ("" if got["cursor_on_failure"] else " (trace cursor NOT on the failure step)")),
        ("switch check_process: k 0 s after the failure step painted, the case's check in its own process | on a thread (interleaved)",
         _check_pair(got["k_busy_check"])),
        ("tokens: page scroll, grid, key -> page painted (goal < 16 ms; busy: right after k painted, the case's work beneath)", _pages(got, "grid_pages")),
        ("tokens: f -> flowing text painted (mid-capture)", f"{got['flow_toggle'] * 1000:.0f} ms"),
        ("tokens: page scroll, flowing text, key -> page painted (goal < 16 ms; busy: right after f painted)", _pages(got, "flow_pages")),
        ("tokens: full garbage collections during those page scrolls / one gc.collect() with the capture shown",
         f"{len(got['gc_full_pages'])} ({max(got['gc_full_pages'], default=0) * 1000:.0f} ms max)"
         f" / {got['gc_collect'] * 1000:.0f} ms"),
        ("tokens: the deferred full collection, run in the pause after the scrolls: after / taking",
         f"{got['gc_pause'][0]:.2f} s / {got['gc_pause'][1] * 1000:.0f} ms" if got["gc_pause"] else "none was owed"),
        (f"tokens: text search with no match over {n:,} ids (worker, progress shown)", f"{got['search']:.2f} s"),
        ("switch lean_token_view: page scroll, grid, idle, on | off (off: Textual's line pipeline and scrollbar; interleaved)",
         _lean(got, "grid_pages_lean")),
        ("switch lean_token_view: page scroll, flowing text, idle, on | off (interleaved)", _lean(got, "flow_pages_lean")),
        ("switch gc_hold: 1,000,000-id capture shown, page scrolls (fresh processes)", _gc_pair(_reduced(""), _reduced("gc_hold"))),
    ]
    return rows


if __name__ == "__main__":
    for label, figure in run():
        print(f"{label}: {figure}")
