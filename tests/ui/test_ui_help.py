"""The help screen: one column grid for every section, short filter labels, wrapped
descriptions hanging under the description column."""

from __future__ import annotations

from ui_helpers import make_app, sample_root, wait_for

from eviscene_tui.ui.actions import BY_ID


def test_filter_labels_are_nouns() -> None:
    assert BY_ID["runs.filter.problems"].label == "Problems"
    assert BY_ID["runs.filter.nosite"].label == "No site"


async def test_help_grid_and_hanging_descriptions(tmp_path_factory) -> None:
    from eviscene_tui.ui.screens.help import HelpScreen, grid_widths

    app = make_app(sample_root(tmp_path_factory))
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        section = app.screen.query_one("#help-runs")
        kw, lw, iw = grid_widths(dict(getattr(app, "_keymap", {}) or {}), app.get_key_display)
        column = 2 + kw + 1 + lw + 1  # where the ids start
        described = column + iw + 1

        def laid_out() -> bool:
            lines = str(section.content).split("\n")
            return len(lines) > 1 and all(len(line) <= section.content_region.width for line in lines)

        assert await wait_for(pilot, laid_out)
        lines = str(section.content).split("\n")[1:]
        ids = [line for line in lines if line[:column].strip()]
        assert any(line[column:].startswith("runs.filter.nosite") for line in ids)
        assert all(line[column - 1] == " " and line[column] != " " for line in ids), ids
        continued = [line for line in lines if not line[:column].strip()]
        assert continued, "some description wraps at 100 columns"
        assert all(line[:described].strip() == "" and line[described] != " " for line in continued), continued


async def test_help_names_the_config_file_in_use(tmp_path_factory, tmp_path) -> None:
    """With ``--config PATH``, the help tells the user to override keys in PATH (the file
    the settings were read from), not in the default location."""
    from eviscene_tui.settings import config_path, load_settings
    from eviscene_tui.ui.screens.help import HelpScreen

    chosen = tmp_path / "elsewhere" / "my-eviscene.toml"
    chosen.parent.mkdir()
    chosen.write_text('theme = "textual-dark"\n', encoding="utf-8")
    assert chosen != config_path()
    app = make_app(sample_root(tmp_path_factory), settings=load_settings(chosen))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        header = str(app.screen.query_one("#help-header").content)
        assert str(chosen) in header, header
        assert str(config_path()) not in header, header
