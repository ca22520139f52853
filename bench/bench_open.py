"""Instant open and live updates : printed, never asserted.

On a generated source trace of the realistic shape (``bench.realistic_trace``: ~720 steps,
~7,000-id prompt captures, 20-entry top-k per completion token, ~56 kB page text, about
190 MB) placed OUTSIDE the case root, the whole app (Pilot, fresh subprocess each) is
timed from the key press to the end of the frame that painted it (``bench/frames.py``: the
frame encoded as for a terminal):

- open the case (Enter on the runs table) until the failure step is painted, vs bare
  ``read + orjson.loads`` of the trace file (goal <= 0.2x), on the token-heavy and the
  text-heavy trace, idle with the index process on and off (switch ``index_process``: the
  byte scan in a process of its own, begun at Enter; the busy open comes while the runs
  screen still works, before that process is started); beside it the byte scan alone (a fresh process, no UI) and the same
  case with an 18 MB trace (what the case screen itself costs: the floor of the open);
  the peak RSS (VmHWM) at that moment and once every row is filled (goal <= 1.2x the file);
  and where that time goes: when the screen was mounted, when the byte scan ran (and its
  thread's CPU), when the rows reached the UI thread, and the UI thread's CPU meanwhile;
- End (last step painted) and Enter on three far steps (step detail shown), straight after
  the open, while the background fill is still running (goal < 100 ms);
- a search of all steps (``/`` + a phrase no step holds, until the status line answers),
  indexed vs the whole-file trace (today's path), same keys (goal: <= today);
- a new case copied into an open tree until it is in the runs table, inotify and
  ``--poll`` (goal < 0.5 s);
- a driver process writing an open case's files (``runtime/events.jsonl`` appended at
  full speed with a torn last line, ``manifest.json`` rewritten in place with a new
  status every 50 ms): from each status written until the case title shows it or a later
  one (goal < 1 s; the view is reloaded at most twice a second during a burst), and key
  press (down) to painted row during the burst (goal < 100 ms).

The "whole-file" runs lift the indexing threshold so the same app takes the path it took
before (chunked parse of every step). Data is cached under ``$EVISCENE_BENCH_DIR``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(os.environ.get("EVISCENE_BENCH_DIR", "/tmp/eviscene-bench"))
QUERY = "no step holds this phrase"

_PRELUDE = r"""
import asyncio, json, os, sys, time, argparse
from pathlib import Path

def peak_rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0

from bench.frames import process_frame_clock
FRAMES = process_frame_clock()  # the end of each frame, encoded as for a terminal
# the end of the first frame the app finished at or after t (a paint is seen when a widget
# renders the row; the operator sees it when the frame is out)
frame_end = FRAMES.end_after

def make_app(root, *, watch=False, poll=False):
    from eviscene_tui.options import AppOptions
    from eviscene_tui.settings import Settings
    from eviscene_tui.ui.app import EvisceneApp
    args = argparse.Namespace(theme=None, poll=poll, operator="bench", workdir=None, config=None)
    return EvisceneApp(AppOptions.from_args(root, args, settings=Settings()), watch=watch)

def send_key(app, key):
    # a key as the terminal driver delivers it (Pilot.press waits for the process to be
    # idle after each key, up to 1 s, which it never is while a background fill runs)
    from textual import events
    char = " " if key == "space" else (key if len(key) == 1 else ("/" if key == "slash" else None))
    event = events.Key(key, char)
    event.set_sender(app)
    app._driver.send_message(event)

DOC_PAINTS = []  # perf_counter of each line the step detail's document view paints

def _watch_doc_paints():
    from eviscene_tui.ui.widgets.doc_view import DocView
    real = DocView.render_line
    def render_line(self, y):
        strip = real(self, y)
        if self.id == "detail-doc":
            DOC_PAINTS.append(time.perf_counter())
        return strip
    DocView.render_line = render_line  # the benchmark's eye on the screen

_watch_doc_paints()

def detail_painted_after(t):
    # when the step detail's document first painted a line after t (None before)
    return next((p for p in DOC_PAINTS if p >= t), None)

async def until(pred, timeout=120.0, step=0.002):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if pred():
            return True
        await asyncio.sleep(step)
    return pred()

PHASES = {}  # perf_counter (and the UI thread's CPU clock) of the moments of the last open

def watch_open_phases():
    # where Enter -> painted goes: the screen mounted, the byte scan (its thread's CPU too),
    # the rows posted to the UI thread (the benchmark's eye on the open, nothing changed)
    import functools
    from eviscene_tui.artifacts import trace as trace_module
    from eviscene_tui.state.case_session import CaseSession
    from eviscene_tui.ui.screens.case import CaseScreen
    # the index as the load step builds it, on its own thread
    real_mount, real_index, real_shown = CaseScreen.on_mount, trace_module._index_trace, CaseSession._on_trace_shown
    @functools.wraps(real_mount)
    def on_mount(self):
        PHASES.setdefault("mounted", time.perf_counter())
        return real_mount(self)
    def index_trace(*args, **kwargs):
        PHASES.setdefault("scan_start", time.perf_counter())
        cpu = time.thread_time()
        try:
            return real_index(*args, **kwargs)
        finally:
            PHASES.setdefault("scan_cpu", time.thread_time() - cpu)
            PHASES.setdefault("scan_end", time.perf_counter())
    def on_trace_shown(self, event):
        PHASES.setdefault("rows_shown", time.perf_counter())
        return real_shown(self, event)
    CaseScreen.on_mount, trace_module._index_trace, CaseSession._on_trace_shown = on_mount, index_trace, on_trace_shown

def open_phases(painted):
    # the phases of the last open, in ms after Enter (None: that moment did not happen)
    enter = PHASES.get("enter")
    if enter is None:
        return {}
    out = {name: (PHASES[name] - enter) * 1000 if name in PHASES else None for name in ("mounted", "scan_start", "scan_end", "rows_shown")}
    out["painted"] = (painted - enter) * 1000 if painted is not None else None
    out["scan_cpu"] = PHASES["scan_cpu"] * 1000 if "scan_cpu" in PHASES else None
    out["ui_cpu"] = (PHASES["ui_cpu_end"] - PHASES["ui_cpu"]) * 1000 if "ui_cpu_end" in PHASES else None
    return out

async def open_case(app, pilot, key, moment="idle"):
    # idle: Enter once the runs screen's scan and integrity pass are done; busy: as soon as the
    # case's row is painted, while they run (the pass hashes the case's bound inputs)
    from eviscene_tui.ui.screens.case import CaseScreen
    from eviscene_tui.ui.widgets.runs_table import RunsTable
    from eviscene_tui.ui.widgets.trace_view import TraceView
    if moment == "busy":
        await until(lambda: app.screen.query(RunsTable) and app.screen.query_one(RunsTable).select_key(key))
    else:
        await until(lambda: app.probes.scan_seconds is not None and app.probes.check_seconds is not None)
        await pilot.pause(0.5)
        assert app.screen.query_one(RunsTable).select_key(key)
    await pilot.pause()
    PHASES.clear()
    start = PHASES["enter"] = time.perf_counter()
    PHASES["ui_cpu"] = time.thread_time()
    # Enter as the terminal driver delivers it (Pilot.press waits for the app to be idle,
    # polling it on the UI thread the open needs), and a poll that looks at the screen's
    # probes, not the DOM (a query every 2 ms cost the open tens of ms of the UI thread)
    send_key(app, "enter")
    views = []
    def painted():
        s = app.screen
        if not isinstance(s, CaseScreen):
            return False
        if not views:
            found = s.query(TraceView)
            if not found:
                return False
            views.append(found.first())
        if s.trace_rows is None:
            return False
        return views[0].probes.failure_painted_at is not None or s.trace_rows.failure_index is None
    await until(painted)
    PHASES["ui_cpu_end"] = time.thread_time()
    screen = app.screen
    tv = screen.query_one(TraceView)
    return screen, tv, await frame_end(tv.probes.failure_painted_at or time.perf_counter()) - start
"""

_BARE = _PRELUDE + r"""
import orjson
t = time.perf_counter()
obj = orjson.loads(Path(sys.argv[1]).read_bytes())
print(json.dumps({"seconds": time.perf_counter() - t, "rss_kb": peak_rss_kb()}))
"""

_SCAN = r"""
import json, sys, time
from eviscene_tui.artifacts.step_index import index_steps
t, c = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as fh:
    index = index_steps(fh)
print(json.dumps({"seconds": time.perf_counter() - t, "cpu": time.process_time() - c, "steps": len(index) if index is not None else None}))
"""

_OPEN = _PRELUDE + r"""
root, key, mode, moment = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[5]
if mode == "whole":
    from eviscene_tui.artifacts import trace as trace_module
    trace_module.LAZY_MIN_BYTES = trace_module.LAZY_MIN_GZ_BYTES = 1 << 62
    if moment == "plain":  # the whole-file path without its chunked parse (EVISCENE_TUI_OFF=chunked_trace)
        moment = "idle"

watch_open_phases()

async def main():
    from eviscene_tui.ui.widgets.trace_view import TraceView
    out = {}
    app = make_app(root)
    async with app.run_test(size=(120, 40)) as pilot:
        screen, tv, shown = await open_case(app, pilot, key, moment)
        out["shown"] = shown
        out["phases"] = open_phases(tv.probes.failure_painted_at)
        out["rss_shown_kb"] = peak_rss_kb()
        out["ok"] = screen.trace_rows is not None and tv.cursor == screen.trace_rows.failure_index
        data = screen.trace_rows
        last = data.step_count - 1
        out["filled_at_paint"] = data.filled()

        async def settle():
            # idle: every row filled, the integrity check answered, the comparison shown
            if moment == "idle":
                await until(lambda: data.filled() == data.step_count and screen.integrity is not None
                            and not screen.session.integrity_running and screen.compare is not None, timeout=600, step=0.05)
                await pilot.pause(0.3)

        # End: the last step painted (busy: straight after the failure step was painted)
        await settle()
        t = time.perf_counter()
        send_key(app, "end")
        await until(lambda: tv.probes.last_row_painted is not None and tv.probes.last_row_painted[0] == last and tv.probes.last_row_painted[1] > t)
        out["end_ms"] = (await frame_end(tv.probes.last_row_painted[1]) - t) * 1000
        # step detail of far steps (the first steps: the fill reaches them last), three
        # of them: one figure on a loaded machine is mostly noise
        out["detail_ms"] = []
        for far in (3, 8, 14):
            tv.goto(far)
            await asyncio.sleep(0.05)
            await settle()
            t = time.perf_counter()
            send_key(app, "enter")
            await until(lambda: detail_painted_after(t) is not None, step=0.001)
            out["detail_ms"].append((await frame_end(detail_painted_after(t)) - t) * 1000)
            send_key(app, "escape")
            await until(lambda: app.screen is screen)
        # search: "/" and the phrase, until the status line answers (includes the 0.12 s typing pause)
        await settle()
        send_key(app, "slash")
        await until(lambda: screen.query_one("#trace-search").has_focus)
        for ch in sys.argv[4]:
            send_key(app, "space" if ch == " " else ch)
        await until(lambda: screen.query_one("#trace-search").value == sys.argv[4])
        t = time.perf_counter()
        await until(lambda: (screen.session.search_status or "").startswith("no step contains"), timeout=120)
        out["search_keys_s"] = time.perf_counter() - t
        send_key(app, "escape")
        await until(lambda: data.filled() == data.step_count, timeout=600, step=0.05)
        out["fill_s"] = time.perf_counter() - screen.session.probes.opened_at
        await pilot.pause(0.3)
        out["rss_filled_kb"] = peak_rss_kb()
        from eviscene_tui.state.trace_search import TraceSearch
        t = time.perf_counter()
        TraceSearch(screen.trace, screen.session.corpus if screen.trace.lazy else None).matches(sys.argv[4] + " again")
        out["search_scan_s"] = time.perf_counter() - t
        out["steps"] = data.step_count
        out["index_s"] = screen.trace.index_seconds
        out["lazy"] = bool(screen.trace.lazy)
    print(json.dumps(out))
asyncio.run(main())
"""

_NEW_CASE = _PRELUDE + r"""
import shutil
root, staging, poll = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "poll"
async def main():
    app = make_app(root, watch=True, poll=poll)
    times = []
    async with app.run_test(size=(120, 40)) as pilot:
        await until(lambda: app.probes.scan_seconds is not None)
        await until(app.watch_ready.is_set)
        await pilot.pause(0.5)
        for n in range(5):
            name = f"new-case-{os.getpid()}-{n}"
            t = time.perf_counter()
            shutil.copytree(staging, root / name)
            await until(lambda: app.store.get(name) is not None, timeout=30, step=0.002)
            await pilot.pause()
            times.append(time.perf_counter() - t)
            await pilot.pause(0.4)
    print(json.dumps({"times": times}))
asyncio.run(main())
"""

_WRITER = r"""
import json, os, sys, time
case, seconds, log_path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
manifest = json.load(open(os.path.join(case, "manifest.json")))
events = os.path.join(case, "runtime", "events.jsonl")
os.makedirs(os.path.dirname(events), exist_ok=True)
log = []
end = time.monotonic() + seconds
n = 0
torn = b""
next_manifest = 0.0
while time.monotonic() < end:
    # the round's event log grows as fast as the writer can go, its last line torn
    line = json.dumps({"event": "policy_request", "n": n, "text": "x" * 200}).encode()
    with open(events, "ab") as fh:
        fh.write(torn + line[: len(line) // 2])
    torn = line[len(line) // 2 :] + b"\n"
    now = time.monotonic()
    if now >= next_manifest:  # and its status changes every 50 ms (in place, as the driver does)
        n += 1
        manifest["status"] = f"burst-{n}"
        with open(os.path.join(case, "manifest.json"), "w") as fh:
            json.dump(manifest, fh, indent=2)
        log.append((n, time.monotonic()))
        next_manifest = now + 0.05
with open(log_path, "w") as fh:  # a file, not stdout: a pipe would fill and block the writer
    json.dump(log, fh)
"""

_BURST = _PRELUDE + r"""
import subprocess
root, key, poll, seconds = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "poll", float(sys.argv[4])
async def main():
    app = make_app(root, watch=True, poll=poll)
    async with app.run_test(size=(120, 40)) as pilot:
        screen, tv, _ = await open_case(app, pilot, key)
        await until(app.watch_ready.is_set)
        await until(lambda: screen.view is not None)
        await pilot.pause(1.0)

        async def key_down():
            target = tv.cursor + 1 if tv.cursor + 1 < screen.trace_rows.step_count else 0
            t = time.perf_counter()
            send_key(app, "down" if target else "home")
            await until(lambda: tv.probes.last_row_painted is not None and tv.cursor == target and tv.probes.last_row_painted[1] > t, timeout=10, step=0.001)
            return (await frame_end(tv.probes.last_row_painted[1]) - t) * 1000

        idle_keys = []  # the same key before the driver writes
        for _ in range(8):
            idle_keys.append(await key_down())
            await asyncio.sleep(0.25)
        log_path = Path(sys.argv[6])
        writer = subprocess.Popen([sys.executable, "-c", sys.argv[5], str(root / key), str(seconds), str(log_path)])
        seen = []  # (status number shown, monotonic when first seen)
        keys = []
        last_key = time.monotonic()
        shown = None
        title = screen.query_one("#case-title")
        while writer.poll() is None:
            text = str(title.content)
            if "burst-" in text:
                n = int(text.split("burst-", 1)[1].split()[0])
                if n != shown:
                    shown = n
                    seen.append((n, time.monotonic()))
            if time.monotonic() - last_key > 0.25:
                keys.append(await key_down())
                last_key = time.monotonic()
            await asyncio.sleep(0.005)
        writer.wait()
        log = [tuple(x) for x in json.loads(log_path.read_text())]
        written = dict(log)
        last = log[-1][0] if log else None
        deadline = time.monotonic() + 3.0
        while last is not None and (shown is None or shown < last) and time.monotonic() < deadline:
            text = str(title.content)  # the writes of the burst's last half second, shown after it
            if "burst-" in text:
                n = int(text.split("burst-", 1)[1].split()[0])
                if n != shown:
                    shown = n
                    seen.append((n, time.monotonic()))
            await asyncio.sleep(0.005)
        # staleness: at each moment the title changed, how long ago the shown status was written
        lags = [at - written[n] for n, at in seen if n in written]
        # what the operator waits for: from each write until the title shows it (or a later one)
        waits = []
        for n, at in log:
            shown_at = next((t for m, t in seen if m >= n), None)
            if shown_at is not None:
                waits.append(shown_at - at)
        print(json.dumps({"writes": len(log), "updates": len(seen), "lag_max": max(lags) if lags else None,
                          "lag_median": statistics.median(lags) if lags else None, "keys_ms": keys, "idle_keys_ms": idle_keys,
                          "wait_median": statistics.median(waits) if waits else None, "wait_max": max(waits) if waits else None,
                          "first_write": log[0][1] if log else None, "first_seen": seen[0][1] if seen else None}))
import statistics
asyncio.run(main())
"""


def _child(code: str, *args: str, timeout: int = 1800, off: str = "") -> dict:
    """Run a benchmark child; ``off``: the parts of the performance layer it runs without
    (``eviscene_tui/switches.py``)."""
    env = {**os.environ, "EVISCENE_TUI_OFF": off}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        return {"error": ((out.stderr or out.stdout).strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


SMALL_PAGE_BYTES = 25_000  # the small trace: the same 720 steps, 18 MB (still indexed)


def _realistic(text_heavy: bool = False, page_bytes: int | None = None) -> dict:
    """The realistic case (trace outside the root), generated once; ``text_heavy``: the
    trace of mostly page text (``bench.realistic_trace``); ``page_bytes``: its pages' size."""
    from bench.realistic_trace import write_case

    from eviscene_tui.artifacts.case import load_case

    base = BENCH_DIR / (("realistic-text-v1" if text_heavy else "realistic-v1") if page_bytes is None else f"realistic-text-{page_bytes}-v1")
    info_path = base / ".info.json"
    if info_path.exists():
        info = json.loads(info_path.read_text())
        if info.get("inside") or load_case(info["case_dir"]).source_trace_path is None:
            info_path.unlink()  # generated inside the root, or unreadable: try outside again
    if not info_path.exists():
        if base.exists():
            shutil.rmtree(base)
        info = write_case(base, text_heavy=text_heavy, page_bytes=page_bytes)
        if load_case(info["case_dir"]).source_trace_path is None:
            shutil.rmtree(base)
            info = {**write_case(base, inside=True, text_heavy=text_heavy, page_bytes=page_bytes), "inside": True}
        info_path.write_text(json.dumps(info))
    return json.loads(info_path.read_text())


def _data() -> tuple[dict, Path]:
    """The realistic case, generated once; a small staging case."""
    info = _realistic()
    staging = BENCH_DIR / "staging-case"
    if not staging.exists():
        from eviscene_tui.scaffold.samples import generate

        tmp = BENCH_DIR / "staging-samples"
        if tmp.exists():
            shutil.rmtree(tmp)
        generate(tmp)
        shutil.copytree(tmp / "single-generating", staging, symlinks=True)
        shutil.rmtree(tmp)
    return info, staging


def _fmt_ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"median {statistics.median(values):.0f} ms, max {max(values):.0f} ms ({len(values)} presses)"


def _fmt_detail(values: list[float]) -> str:
    return f"median {statistics.median(values):.0f} ms, max {max(values):.0f} ms ({len(values)} far steps)"


def _fmt_phases(phases: dict, scan: dict) -> str:
    """The moments of one open (ms after Enter): the screen mounted, the byte scan's start and
    end (its thread's CPU beside it, and the scan alone in a process of its own), the rows
    handed to the UI thread, the failure step painted; the UI thread's CPU meanwhile."""
    def ms(name: str) -> str:
        value = phases.get(name)
        return "n/a" if value is None else f"{value:.0f}"
    alone = f", alone {scan['seconds'] * 1000:.0f}" if "seconds" in scan else ""
    return (f"screen mounted {ms('mounted')}; scan or wait for the index process {ms('scan_start')}-{ms('scan_end')} (its thread's CPU {ms('scan_cpu')}{alone});"
            f" rows to the UI thread {ms('rows_shown')}; painted {ms('painted')}; UI thread CPU {ms('ui_cpu')}")


def _open_rows(root: Path, key: str, info: dict, label: str) -> list[tuple[str, str]]:
    """The open figures of one trace: the indexed open idle and busy side by side, the
    whole-file path (what it was before the index), with and without its chunked parse."""
    rows: list[tuple[str, str]] = []
    size = int(info["bytes"])
    bare = _child(_BARE, info["path"])
    idle = _child(_OPEN, str(root), key, "indexed", QUERY, "idle")
    busy = _child(_OPEN, str(root), key, "indexed", QUERY, "busy")
    here = _child(_OPEN, str(root), key, "indexed", QUERY, "idle", off="index_process")
    # the whole-file runs: nothing for the index process to do (the app's threshold is lifted)
    whole = _child(_OPEN, str(root), key, "whole", QUERY, "idle", off="index_process")
    plain = _child(_OPEN, str(root), key, "whole", QUERY, "plain", off="chunked_trace,index_process")
    for name, res in (("bare orjson", bare), ("indexed open, idle", idle), ("indexed open, busy", busy), ("whole-file open", whole),
                      ("whole-file open without the chunked parse", plain)):
        if "error" in res:
            rows.append((f"open: {name}", "failed: " + str(res["error"])))
    if any("error" in res for res in (bare, idle, busy)):
        return rows
    b = bare["seconds"]
    w = f"; whole-file path (before) {whole['shown']:.2f} s = {whole['shown'] / b:.2f}x" if "error" not in whole else ""
    scan = _child(_SCAN, info["path"])
    if "error" not in scan:
        in_app = f"; in the app {idle['index_s']:.2f} s (beside the screen's first paint, one interpreter)" if idle.get("index_s") else ""
        rows.append((f"open: the byte scan that indexes the steps, alone, {label}",
                     f"{scan['seconds']:.2f} s (CPU {scan['cpu']:.2f} s) = {scan['seconds'] / bare['seconds']:.2f}x of read+orjson.loads{in_app}"))
    rows.append((f"open: Enter -> failure step painted, {label}, idle | busy (goal <= 0.2x read+orjson.loads)",
                 f"idle {idle['shown']:.2f} s = {idle['shown'] / b:.2f}x | busy {busy['shown']:.2f} s = {busy['shown'] / b:.2f}x"
                 f" of read+orjson.loads {b:.2f} s{w}" + ("" if idle["ok"] and busy["ok"] else " (cursor NOT on the failure step)")))
    if "error" not in here:
        gain = (here["shown"] - idle["shown"]) / here["shown"] * 100
        rows.append((f"switch index_process: Enter -> failure step painted, idle, {label}, on | off (scanned on the load thread)",
                     f"on {idle['shown']:.2f} s | off {here['shown']:.2f} s ({gain:+.0f} % by the index process)"))
    else:
        rows.append(("switch index_process: open with it off", "failed: " + str(here["error"])))
    rows.extend((f"open: where Enter -> painted goes, {label}, {name} (ms after Enter)", _fmt_phases(res.get("phases") or {}, scan))
                for name, res in (("idle", idle), ("busy", busy), ("idle, index_process off", here)) if "error" not in res)
    rss, rss_f = idle["rss_shown_kb"] * 1024, idle["rss_filled_kb"] * 1024
    rows.append(("open: peak RSS (goal <= 1.2x the file)",
                 f"at the paint {rss / 1e6:.0f} MB = {rss / size:.2f}x; every row filled {rss_f / 1e6:.0f} MB = {rss_f / size:.2f}x"
                 f" (bare orjson.loads {bare['rss_kb'] * 1024 / size:.2f}x)"))
    if "error" not in whole and "error" not in plain:
        on, off = whole["rss_filled_kb"] * 1024, plain["rss_filled_kb"] * 1024
        rows.append(("switch chunked_trace: whole-file path peak RSS, chunked parse on | off (plain orjson.loads)",
                     f"on {on / size:.2f}x | off {off / size:.2f}x the file ({(off - on) / off * 100:+.0f} % by the chunked parse);"
                     f" paint on {whole['shown']:.2f} s | off {plain['shown']:.2f} s"))
    rows.append(("open: rows parsed before the paint / background fill of every row",
                 f"{idle['filled_at_paint']} of {idle['steps']} / {idle['fill_s']:.1f} s after Enter"))
    wend = f" (whole-file path {whole['end_ms']:.0f} ms)" if "error" not in whole else ""
    rows.append(("open: End -> last step painted, idle | busy (right after the paint, during the fill; goal < 100 ms)",
                 f"idle {idle['end_ms']:.0f} ms | busy {busy['end_ms']:.0f} ms{wend}"))
    rows.append(("open: Enter on a far step -> step detail shown, idle | busy (goal < 100 ms)",
                 f"idle {_fmt_detail(idle['detail_ms'])} | busy {_fmt_detail(busy['detail_ms'])}"))
    ws = f" (whole-file path {whole['search_keys_s']:.2f} s)" if "error" not in whole else ""
    rows.append(("search: '/' + phrase -> status answered, all steps, idle | busy (incl. 0.12 s typing pause)",
                 f"idle {idle['search_keys_s']:.2f} s | busy {busy['search_keys_s']:.2f} s{ws}"))
    wscan = f" vs whole-file path {whole['search_scan_s'] * 1000:.0f} ms" if "error" not in whole else ""
    rows.append(("search: one scan of every step (TraceSearch.matches)", f"{idle['search_scan_s'] * 1000:.0f} ms{wscan}"))
    return rows


def run() -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    info, staging = _data()
    root = Path(info["root"])
    key = Path(info["case_dir"]).name
    size = int(info["bytes"])
    outside = not Path(info["path"]).resolve().is_relative_to(Path(info["case_dir"]).resolve())
    label = f"{size / 1e6:.0f} MB trace, {info['steps']} steps, " + (
        "outside the case root" if outside else "INSIDE the case root (this build does not read inputs outside it)")
    rows.extend(_open_rows(root, key, info, label))
    small = _realistic(text_heavy=True, page_bytes=SMALL_PAGE_BYTES)
    floor = [_child(_OPEN, small["root"], Path(small["case_dir"]).name, "indexed", QUERY, moment) for moment in ("idle", "busy")]
    if all("error" not in res for res in floor):
        rows.append((f"open: the case screen's own cost: the same case with a {int(small['bytes']) / 1e6:.0f} MB trace, idle | busy",
                     f"idle {floor[0]['shown']:.2f} s | busy {floor[1]['shown']:.2f} s (no trace work opens a case faster than this)"))
        rows.extend((f"open: where the case screen's own cost goes, {name} (ms after Enter)", _fmt_phases(res.get("phases") or {}, {}))
                    for name, res in zip(("idle", "busy"), floor))
    else:
        rows.append(("open: the case screen's own cost", "failed: " + "; ".join(str(res.get("error")) for res in floor)))
    text = _realistic(text_heavy=True)
    rows.extend((label.replace("open:", "open (text-heavy):", 1), figure) for label, figure in _open_rows(
        Path(text["root"]), Path(text["case_dir"]).name, text,
        f"{int(text['bytes']) / 1e6:.0f} MB text-heavy trace, {text['steps']} steps, outside the case root"))
    for mode in ("inotify", "poll"):
        res = _child(_NEW_CASE, str(root), str(staging), mode)
        if "error" in res:
            rows.append((f"live: new case -> in the runs table ({mode})", "failed: " + str(res["error"])))
        else:
            t = res["times"]
            rows.append((f"live: new case copied into the open tree -> in the runs table ({mode}, goal < 0.5 s)",
                         f"median {statistics.median(t):.2f} s, max {max(t):.2f} s ({len(t)} cases)"))
        for name in os.listdir(root):
            if name.startswith("new-case-"):
                shutil.rmtree(root / name)
    manifest = Path(info["case_dir"]) / "manifest.json"
    doc = json.loads(manifest.read_bytes())
    doc["status"] = "no_admissible_hints"  # as generated (an interrupted run may have left a burst status)
    saved = json.dumps(doc, indent=2).encode()
    manifest.write_bytes(saved)
    for mode in ("inotify", "poll"):
        res = _child(_BURST, str(root), key, mode, "4", _WRITER, str(BENCH_DIR / "writer-log.json"))
        if "error" in res:
            rows.append((f"live: burst into the open case ({mode})", "failed: " + str(res["error"])))
        else:
            first = (res["first_seen"] - res["first_write"]) if res["first_seen"] and res["first_write"] else None
            rows.append((f"live: driver writing the open case at full speed ({mode}): status shown vs written (goal < 1 s)",
                         (f"first change shown after {first:.2f} s; " if first is not None else "")
                         + (f"each write shown after {res['wait_median']:.2f} s (median), {res['wait_max']:.2f} s (max); "
                            if res.get("wait_max") is not None else "never updated; ")
                         + f"{res['updates']} view updates for {res['writes']} writes"))
            rows.append((f"live: key (down) -> row painted, idle (before the burst) | busy (during it) ({mode}, goal < 100 ms)",
                         f"idle {_fmt_ms(res['idle_keys_ms'])} | busy {_fmt_ms(res['keys_ms'])}"))
        # put the case back as it was (the writer rewrote its manifest, grew its events)
        manifest.write_bytes(saved)
        runtime = Path(info["case_dir"]) / "runtime"
        if runtime.exists():
            shutil.rmtree(runtime)
    return rows


if __name__ == "__main__":
    for label, figure in run():
        print(f"{label:<100} {figure}")
