"""``python -m eviscene_tui.scaffold.samples [DEST]`` regenerates the sample runs (default ./sample_runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from eviscene_tui.scaffold.samples import generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eviscene_tui.scaffold.samples", description=__doc__)
    parser.add_argument("dest", nargs="?", default="sample_runs", help="output folder (replaced when it holds earlier samples)")
    args = parser.parse_args(argv)
    count = generate(Path(args.dest))
    total = sum(p.stat().st_size for p in Path(args.dest).rglob("*") if p.is_file())
    print(f"wrote {count} files ({total / 1e6:.2f} MB) to {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
