"""Token inspector figures (printed, never asserted).

- first paint of a 1,000,000-id capture (goal < 1 s): from pushing the TokenScreen
  to the first frame with the token grid on screen (load in a worker, cell layout,
  first rows rendered), headless ``run_test`` at 140x40;
- one page scroll (goal < 50 ms): page-down on the grid, rendering every visible row
  from a cold strip cache; and the same measured through Pilot (key press to idle,
  which includes Pilot's own waiting).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace


def _bench() -> list[tuple[str, str]]:
    from textual.app import App

    from eviscene_tui.tokens import tiny
    from eviscene_tui.tokens.decode import LocalTokenizerDecoder
    from eviscene_tui.tokens.layout import CellLayout
    from eviscene_tui.tokens.sources import load_capture
    from eviscene_tui.tokens.synthetic import big_case
    from eviscene_tui.ui.screens.tokens import TokenScreen
    from eviscene_tui.ui.widgets.token_view import TokenView

    n = 1_000_000
    case = big_case(n)
    decoder = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="tiny (bench)")
    rows: list[tuple[str, str]] = []

    t = time.perf_counter()
    data = load_capture(case, "step:0")
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    CellLayout(data.ids, decoder.vision)
    layout_s = time.perf_counter() - t

    tmp = Path(tempfile.mkdtemp(prefix="bench-tokens-"))
    options = SimpleNamespace(root=tmp, workdir=tmp / "wd", tokenizer=None, policy_profile=None, policy_url=None, policy_model=None)
    results: dict[str, float] = {}
    scrolls: list[float] = []
    pilot_scrolls: list[float] = []

    class Harness(App):
        pass

    async def main() -> None:
        app = Harness()
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            t0 = time.perf_counter()
            app.push_screen(TokenScreen(case, options, source="step:0", decoder=decoder))
            while True:
                await asyncio.sleep(0.002)
                views = app.screen.query(TokenView)
                if views and views.first().rows is not None:
                    break
                if time.perf_counter() - t0 > 60:
                    raise RuntimeError("token screen never loaded")
            view = views.first()
            await pilot.pause()  # the frame with the grid
            results["first_paint"] = time.perf_counter() - t0
            height = view.scrollable_content_region.height
            for _ in range(20):
                t = time.perf_counter()
                view.action_cursor_page(1)
                for y in range(height):
                    view.render_line(y)
                scrolls.append(time.perf_counter() - t)
            for _ in range(10):
                t = time.perf_counter()
                await pilot.press("pagedown")
                pilot_scrolls.append(time.perf_counter() - t)

    asyncio.run(main())
    rows.append(("first paint, 1,000,000-id capture (goal < 1 s)", f"{results['first_paint'] * 1000:.0f} ms"))
    rows.append(("  of which: load capture (worker)", f"{load_s * 1000:.0f} ms"))
    rows.append(("  of which: cell layout, image runs collapsed (worker)", f"{layout_s * 1000:.0f} ms"))
    rows.append(("page scroll, visible rows rendered (goal < 50 ms)", f"median {statistics.median(scrolls) * 1000:.1f} ms, max {max(scrolls) * 1000:.1f} ms"))
    rows.append(("page scroll via Pilot key press to idle", f"median {statistics.median(pilot_scrolls) * 1000:.1f} ms"))
    return rows


def run() -> list[tuple[str, str]]:
    return _bench()


if __name__ == "__main__":
    for label, figure in run():
        print(f"{label}: {figure}")
