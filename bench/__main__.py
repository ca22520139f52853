"""`make bench`: run every area's benchmark and print the figures side by side.

Each ``bench/bench_<area>.py`` exposes ``run() -> list[tuple[str, str]]``.
Figures are printed, never asserted: goals are stated in the labels.
Usage: ``python -m bench [--quiet-machine] [area ...]`` (default: every area). Every figure
is measured with a second process busy on one core (``bench/load.py``); ``--quiet-machine``
leaves it out.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback

from bench.load import load_average, one_core_busy

AREAS = ["artifacts", "ui", "open", "policy", "tokens", "gate", "triage"]


def main(argv: list[str]) -> int:
    quiet = "--quiet-machine" in argv
    areas = [a for a in argv if a != "--quiet-machine"] or AREAS
    print(f"eviscene-tui benchmarks ({time.strftime('%Y-%m-%d %H:%M:%S')}; figures, not pass/fail; load average {load_average()}"
          + ("; a quiet machine)" if quiet else "; a second process busy on one core throughout)"))
    with one_core_busy(not quiet):
        return _run(areas)


def _run(areas: list[str]) -> int:
    failed = 0
    for area in areas:
        print(f"\n== {area} ==")
        try:
            module = importlib.import_module(f"bench.bench_{area}")
        except ModuleNotFoundError as exc:
            print(f"  (no benchmark module: {exc.name})")
            continue
        started = time.perf_counter()
        try:
            rows = module.run()
        except Exception:  # noqa: BLE001 - a broken benchmark must not hide the others (its traceback is printed)
            failed += 1
            traceback.print_exc()
            continue
        width = max((len(label) for label, _ in rows), default=0)
        for label, figure in rows:
            print(f"  {label.ljust(width)}  {figure}")
        print(f"  ({time.perf_counter() - started:.1f} s for this area; load average {load_average()})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
