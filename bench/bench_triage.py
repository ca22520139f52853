"""The triage queue (issue 26): label a case and go to the next one. Printed, never asserted.

On a queue of no-site cases (``samples.synthetic.make_many_cases``, the no-site filter),
the whole app (Pilot, a fresh subprocess) opens the first case, then for each case sends
``l`` and a number, as the terminal driver delivers keys, and times from the number to
the end of the frame that painted the next case of the queue (its case view; goal < 150 ms,
2 keys a case). The label reaches the journal (fsync) in an app worker meanwhile; the
next case was read ahead while the one before was shown, and is painted into the same
case screen. The machine's load average is printed with the figure.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH_DIR = Path(os.environ.get("EVISCENE_BENCH_DIR", "/tmp/eviscene-bench"))
CASES = 60  # every tenth synthetic case has no site: a queue of six
LABELS = 5  # cases labelled per run (the next one of each is the one timed)

_CHILD = r"""
import argparse, asyncio, json, sys, time
from pathlib import Path

from bench.frames import process_frame_clock
FRAMES = process_frame_clock()  # the end of each frame, encoded as for a terminal

def send_key(app, key):
    from textual import events
    event = events.Key(key, key if len(key) == 1 else None)
    event.set_sender(app)
    app._driver.send_message(event)

async def until(pred, timeout=60.0, step=0.001):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if pred():
            return True
        await asyncio.sleep(step)
    return pred()

async def main(root, workdir, count):
    from eviscene_tui.options import AppOptions
    from eviscene_tui.settings import Settings
    from eviscene_tui.ui.app import EvisceneApp
    from eviscene_tui.ui.screens.case import CaseScreen
    from eviscene_tui.ui.screens.label import TriageLabelScreen
    from eviscene_tui.ui.widgets.runs_table import RunsTable
    args = argparse.Namespace(theme=None, poll=False, operator="bench", workdir=workdir, config=None)
    app = EvisceneApp(AppOptions.from_args(Path(root), args, settings=Settings()), watch=False)
    out = {"ms": [], "keys": 2}
    async with app.run_test(size=(120, 40)) as pilot:
        await until(lambda: app.probes.scan_seconds is not None)
        await pilot.press("n")  # the no-site queue
        await until(lambda: app.store.filter_name == "nosite" and app.store.visible())
        queue = [r.key for r in app.store.visible()]
        out["queue"] = len(queue)
        app.screen.query_one(RunsTable).select_key(queue[0])
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, CaseScreen) and app.screen.view is not None)
        await pilot.pause(0.3)
        for i in range(min(count, len(queue) - 1)):
            send_key(app, "l")
            await until(lambda: isinstance(app.screen, TriageLabelScreen))
            await pilot.pause(0.05)
            t = time.perf_counter()
            send_key(app, "1")
            # the case screen shows the next case of the queue (the same screen, read ahead)
            await until(lambda: isinstance(app.screen, CaseScreen) and app.screen.key == queue[i + 1] and app.screen.session.probes.updated_at is not None)
            painted = await FRAMES.end_after(app.screen.session.probes.updated_at)
            out["ms"].append((painted - t) * 1000)
            await pilot.pause(0.3)  # the operator reads the case (and the journal write ends)
        await until(lambda: sum(1 for k in queue if app.store.get(k).label) >= len(out["ms"]))
        out["labelled"] = sum(1 for k in queue if app.store.get(k).label)
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def _data() -> Path:
    from eviscene_tui.scaffold.samples.synthetic import make_many_cases

    root = BENCH_DIR / f"triage-queue-{CASES}"
    if not (root / ".done").exists():
        if root.exists():
            shutil.rmtree(root)
        make_many_cases(root, CASES, workers=1)
        (root / ".done").write_text("")
    return root


def run() -> list[tuple[str, str]]:
    root = _data()
    with tempfile.TemporaryDirectory(prefix="eviscene-bench-triage-") as work:
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(root), work, str(LABELS)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        return [("triage: l + number -> next case painted", "failed: " + ((proc.stderr or proc.stdout).strip().splitlines() or ["?"])[-1])]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    ms = res["ms"]
    if not ms:
        return [("triage: l + number -> next case painted", f"no case to time (queue of {res.get('queue')})")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return [
        (f"triage: label and go to the next case, {res['keys']} keys (l, a number); queue of {res['queue']} no-site cases",
         f"{res['labelled']} labelled in {len(ms)} picks (load average {load:.1f} on {os.cpu_count()} cores)"),
        ("triage: the number -> next case painted (goal < 150 ms)",
         f"median {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms ({', '.join(f'{m:.0f}' for m in ms)})"),
    ]
