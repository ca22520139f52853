"""`make bench`: run every area's benchmark and print the figures side by side.

Each ``bench/bench_<area>.py`` exposes ``run() -> list[tuple[str, str]]``.
Figures are printed, never asserted: goals are stated in the labels.
Usage: ``python -m bench [area ...]`` (default: every area).
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback

AREAS = ["artifacts", "ui", "open", "policy", "tokens", "gate", "triage"]


def main(argv: list[str]) -> int:
    areas = argv or AREAS
    print(f"eviscene-tui benchmarks ({time.strftime('%Y-%m-%d %H:%M:%S')}; figures, not pass/fail)")
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
        print(f"  ({time.perf_counter() - started:.1f} s for this area)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
