"""UI benchmarks : printed, not asserted.

- runs-screen first paint on 10,000 generated cases (goal < 2 s), the full scan, and the
  background integrity pass that gives every row the problem count of ``check``;
- opening a case whose source trace is ~200 MB, outside the case root, in a tree written
  elsewhere (recorded ``/data/eviscene/…``: found through the moved-tree rules): time until
  the failure step is shown vs bare ``orjson.loads`` of the same file (goal <= 1.5x), and peak RSS vs file size
  (goal <= 2.5x), measured in a fresh subprocess.

"First paint" and "shown" are timed to the end of the app's frame that painted the row,
encoded as for a terminal (``bench/frames.py``).

Generated data is cached under ``$EVISCENE_BENCH_DIR`` (default
``/tmp/eviscene-bench``) because writing 10,000 cases takes a while.
Sizes can be reduced with ``EVISCENE_BENCH_CASES`` / ``EVISCENE_BENCH_TRACE_MB``.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.frames import frame_clock

BENCH_DIR = Path(os.environ.get("EVISCENE_BENCH_DIR", "/tmp/eviscene-bench"))
N_CASES = int(os.environ.get("EVISCENE_BENCH_CASES", "10000"))
TRACE_MB = int(os.environ.get("EVISCENE_BENCH_TRACE_MB", "200"))


def _many_cases() -> Path:
    root = BENCH_DIR / f"many-{N_CASES}"
    marker = root / ".complete"
    if not marker.exists():
        from eviscene_tui.scaffold.samples.synthetic import make_many_cases

        if root.exists():
            import shutil

            shutil.rmtree(root)
        make_many_cases(root, N_CASES)
        marker.write_text("ok")
    return root


def _big_case() -> tuple[Path, dict]:
    # the trace lives outside the case root and the tree was "written" elsewhere (recorded
    # /data/eviscene/synthetic/...): the open goes through the moved-tree rules
    root = BENCH_DIR / f"big-{TRACE_MB}mb-outside-moved"
    case = root / "big-case"
    info_path = root / ".info.json"
    if not info_path.exists():
        from eviscene_tui.scaffold.samples.synthetic import make_big_case

        case.mkdir(parents=True, exist_ok=True)
        info = make_big_case(case, TRACE_MB * 1_000_000)
        info_path.write_text(json.dumps(info))
    return case, json.loads(info_path.read_text())


async def _keys_while(app, frames, until_done) -> list[float]:
    """A down key every 0.25 s until ``until_done()``: each from the key to the end of the
    first frame that painted the cursor on another row (ms). Read from the table's probe at
    each frame's end: a frame finished before a poll saw the cursor move still counts (timed
    from that poll, such a key waited for the next frame instead)."""
    from textual import events

    from eviscene_tui.ui.widgets.runs_table import RunsTable

    got: list[float] = []
    shown: list[RunsTable] = []  # the table the frames' marks read
    frames.mark = lambda: shown[0].probes.cursor_painted if shown else None
    while not until_done():
        try:
            table = app.screen.query_one(RunsTable)
        except Exception:  # noqa: BLE001 - screen not mounted yet
            await asyncio.sleep(0.05)
            continue
        if len(table.rows) < 3:
            await asyncio.sleep(0.05)
            continue
        shown[:] = [table]
        before = table.cursor
        key = "down" if before + 1 < len(table.rows) else "home"
        t = time.perf_counter()
        event = events.Key(key, None)
        event.set_sender(app)
        app._driver.send_message(event)  # as the terminal driver delivers a key
        frame = None
        while frame is None and time.perf_counter() - t < 10:
            await asyncio.sleep(0.001)
            frame = frames.first_marked(t, lambda row, left=before: row is not None and row != left)
        got.append(((frame[0] if frame else time.perf_counter()) - t) * 1000)
        await asyncio.sleep(0.25)
    frames.mark = None
    return got


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _reap_children(timeout: float = 30.0) -> None:
    """Wait for the pool processes the app shut down, so their CPU time is counted."""
    import multiprocessing

    deadline = time.perf_counter() + timeout
    while multiprocessing.active_children() and time.perf_counter() < deadline:
        time.sleep(0.05)


async def _runs_first_paint(root: Path) -> tuple[float, float, int, float, list[float], float, float]:
    """Seconds to the first rows painted, to every row listed, the cases, seconds to every
    row's problem count, the keys' latencies (ms), and the CPU seconds of the app's process
    and of its pool processes from the launch to the end of the integrity pass."""
    from eviscene_tui.options import AppOptions
    from eviscene_tui.settings import Settings
    from eviscene_tui.ui.app import EvisceneApp
    from eviscene_tui.ui.widgets.runs_table import RunsTable

    started = time.perf_counter()
    cpu_app, cpu_pool = _cpu_seconds(resource.RUSAGE_SELF), _cpu_seconds(resource.RUSAGE_CHILDREN)
    app = EvisceneApp(AppOptions.from_args(root, object(), settings=Settings()), watch=False)
    first = None
    with frame_clock() as frames:
        async with app.run_test(size=(120, 40)):
            while time.perf_counter() - started < 600:
                try:
                    table = app.screen.query_one(RunsTable)
                except Exception:  # noqa: BLE001 - screen not mounted yet
                    table = None
                painted = table.probes.first_row_painted_at if table is not None else None
                frame = frames.after(painted) if painted is not None else None
                if frame is not None:  # the end of the frame that painted the first row
                    first = frame[0] - started
                    break
                await asyncio.sleep(0.005)
            keys_task = asyncio.ensure_future(_keys_while(app, frames, lambda: app.probes.check_seconds is not None))
            full, count, checked = await _scan_and_check(app, started)
            keys = await keys_task
            cpu_app = _cpu_seconds(resource.RUSAGE_SELF) - cpu_app
    _reap_children()
    cpu_pool = _cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_pool
    return first or float("nan"), full, count, checked, keys, cpu_app, cpu_pool


async def _scan_and_check(app, started: float) -> tuple[float, int, float]:
    """Seconds from ``started`` to the full scan and to the integrity pass, and the cases."""
    while app.probes.scan_seconds is None and time.perf_counter() - started < 600:
        await asyncio.sleep(0.05)
    full = time.perf_counter() - started
    count = len(app.store)
    # the background integrity pass (the same problems as `check`) after the scan
    while app.probes.check_seconds is None and time.perf_counter() - started < 1200:
        await asyncio.sleep(0.05)
    checked = time.perf_counter() - started
    return full, count, checked


# Run in a subprocess: open the big case and report the time to the failure step and peak RSS.
_PEAK_RSS = r"""
import resource

def peak_rss_kb():
    # VmHWM belongs to this process image; ru_maxrss can carry the parent's peak across fork+exec on Linux
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""

_CHILD = _PEAK_RSS + r"""
import asyncio, json, resource, sys, time
from pathlib import Path
from eviscene_tui.options import AppOptions
from eviscene_tui.ui.app import EvisceneApp
from eviscene_tui.settings import Settings
from eviscene_tui.ui.screens.case import CaseScreen
from eviscene_tui.ui.widgets.trace_view import TraceView
from bench.frames import process_frame_clock

FRAMES = process_frame_clock()  # the end of each frame, encoded as for a terminal

case = Path(sys.argv[1])
async def main():
    app = EvisceneApp(AppOptions.from_args(case, object(), settings=Settings()), watch=False)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.probes.scan_seconds is None:
            await asyncio.sleep(0.01)
        await pilot.pause()
        screen = CaseScreen(case, app.options, key=case.name)
        start = time.perf_counter()
        await app.push_screen(screen)
        tv = None
        while time.perf_counter() - start < 600:
            if screen.trace_rows is not None:
                tv = screen.query_one(TraceView)
                if tv.probes.failure_painted_at is not None or screen.trace_rows.failure_index is None:
                    break
            await asyncio.sleep(0.002)
        painted = tv.probes.failure_painted_at if tv is not None and tv.probes.failure_painted_at else time.perf_counter()
        shown = await FRAMES.end_after(painted) - start  # the end of the frame that painted it
        await pilot.pause()
        tv = screen.query_one(TraceView)
        ok = screen.trace_rows is not None and tv.cursor == screen.trace_rows.failure_index
        # scroll pages: pure Line-API render time of a full viewport after each page move
        height = tv.scrollable_content_region.height
        scroll = 0.0
        for _ in range(20):
            tv.action_page(1)
            t = time.perf_counter()
            for y in range(height):
                tv.render_line(y)
            scroll += time.perf_counter() - t
        scroll /= 20
        from eviscene_tui.state.trace_search import TraceSearch
        t = time.perf_counter()
        TraceSearch(screen.trace).matches("no step holds this phrase")
        search = time.perf_counter() - t
        print(json.dumps({"search": search, "shown": shown, "ok": ok, "failure": screen.trace_rows.failure_index if screen.trace_rows else None,
                          "steps": screen.trace_rows.step_count if screen.trace_rows else 0, "page": scroll,
                          "maxrss_kb": peak_rss_kb()}))
asyncio.run(main())
"""

_BARE = _PEAK_RSS + r"""
import json, resource, sys, time
import orjson
from pathlib import Path
t = time.perf_counter()
data = Path(sys.argv[1]).read_bytes()
obj = orjson.loads(data)
print(json.dumps({"seconds": time.perf_counter() - t, "maxrss_kb": peak_rss_kb()}))
"""


def _child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip().splitlines()[-1:] or ["failed"]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    values = sorted(values)
    return f"median {values[len(values) // 2]:.0f} ms, max {values[-1]:.0f} ms ({len(values)} keys)"


def run() -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    many = _many_cases()
    prep = time.perf_counter() - t
    first, full, count, checked, keys, cpu_app, cpu_pool = asyncio.run(_runs_first_paint(many))
    rows.append((f"ui: runs screen first rows painted, {count:,} cases (goal <= 1 s after launch)", f"{first:.2f} s"))
    rows.append((f"ui: runs screen every row listed, {count:,} cases", f"{full:.2f} s" + (f" (data generated in {prep:.0f} s)" if prep > 1 else "")))
    rows.append((f"ui: runs screen every row's problem count (the integrity pass, as `check`), {count:,} cases (goal < 5 s)",
                 f"{checked:.2f} s after opening ({checked - full:.2f} s after the scan)"))
    rows.append(("ui: key (down) -> runs table painted, throughout the scan and integrity pass (goal < 100 ms)", _ms(keys)))
    rows.append((f"ui: CPU from the launch to every row's problem count, {count:,} cases",
                 f"app process {cpu_app:.1f} s, its pool processes {cpu_pool:.1f} s (load average {os.getloadavg()[0]:.1f})"))

    case, info = _big_case()
    trace = Path(info["path"])
    size = trace.stat().st_size
    bare = _child(_BARE, str(trace))
    opened = _child(_CHILD, str(case))
    if "error" in bare or "error" in opened:
        rows.append(("ui: open 200 MB case", f"failed: {bare.get('error') or opened.get('error')}"))
        return rows
    ratio = opened["shown"] / bare["seconds"] if bare["seconds"] else float("nan")
    rows.append(
        (
            f"ui: open case, {size / 1e6:.0f} MB trace outside the root, tree moved, {opened['steps']:,} steps: failure step shown (goal <= 1.5x orjson.loads)",
            f"{opened['shown']:.2f} s vs orjson.loads {bare['seconds']:.2f} s = {ratio:.2f}x"
            + ("" if opened["ok"] else " (cursor NOT on the failure step)"),
        )
    )
    rss = opened["maxrss_kb"] * 1024
    rows.append(
        (
            "ui: open case peak RSS (goal <= 2.5x file size)",
            f"{rss / 1e6:.0f} MB = {rss / size:.2f}x file (bare orjson.loads process: {bare['maxrss_kb'] * 1024 / 1e6:.0f} MB)",
        )
    )
    rows.append(("ui: trace view, render one page after page-down (Line API)", f"{opened['page'] * 1000:.1f} ms per page"))
    rows.append(("ui: search the steps' text (/), one full scan of that trace", f"{opened['search']:.2f} s"))
    return rows


if __name__ == "__main__":
    for label, figure in run():
        print(f"{label:<100} {figure}")
