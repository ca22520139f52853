import subprocess
import sys

from eviscene_tui.cli import main


def test_help_is_fast_and_does_not_import_textual():
    code = (
        "import sys\n"
        "from eviscene_tui.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "assert 'textual' not in sys.modules, 'textual imported by --help'\n"
        "assert 'httpx' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "check" in out.stdout and "stream" in out.stdout


def test_module_entry_point_works():
    out = subprocess.run([sys.executable, "-m", "eviscene_tui", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "eviscene-tui" in out.stdout


def test_missing_path_is_usage_error(tmp_path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err


def test_help_lists_every_subcommand_one_line_each(capsys):
    import pytest

    from eviscene_tui.cli import SUBCOMMANDS

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for name, (_module, help_) in SUBCOMMANDS.items():
        assert any(line.split()[:1] == [name] and help_ in line for line in lines), name


def test_app_path_map_from_flags_then_config(tmp_path, capsys) -> None:
    import argparse

    from eviscene_tui.cli import main
    from eviscene_tui.options import AppOptions
    from eviscene_tui.settings import Settings

    settings = Settings.model_validate({"paths": {"map": {"/cfg/old": str(tmp_path / "cfg-new")}}})
    args = argparse.Namespace(path_map=[f"/cli/old={tmp_path / 'cli-new'}"], workdir=None, config=None)
    options = AppOptions.from_args(tmp_path, args, settings=settings)
    assert options.path_map.entries == (("/cli/old", str(tmp_path / "cli-new")), ("/cfg/old", str(tmp_path / "cfg-new")))
    assert main(["--path-map", "no-equals", str(tmp_path)]) == 2
    assert "OLD=NEW" in capsys.readouterr().err


def test_app_without_a_terminal_refuses(tmp_path):
    """Opening the app with stdin/stdout not a TTY (a pipe, a file, a background job)
    says why and exits 2 instead of painting escape codes into the pipe."""
    out = subprocess.run(
        [sys.executable, "-m", "eviscene_tui", str(tmp_path)],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert b"needs a terminal" in out.stderr and b"eviscene-tui check" in out.stderr
    assert out.stdout == b"" and b"\x1b" not in out.stderr and b"Traceback" not in out.stderr
    # the headless commands are unaffected
    check = subprocess.run([sys.executable, "-m", "eviscene_tui", "check", str(tmp_path)], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert b"needs a terminal" not in check.stderr and check.returncode == 3  # an empty folder: no case found


def test_demo_without_a_terminal_refuses_before_starting_anything(tmp_path):
    """`demo` opens the app too: without a TTY it says why at once, and starts no server
    and no gated driver (nothing is written to its work directory)."""
    work = tmp_path / "work"
    out = subprocess.run(
        [sys.executable, "-m", "eviscene_tui", "demo", str(tmp_path), "--workdir", str(work)],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert b"needs a terminal" in out.stderr and b"Traceback" not in out.stderr
    assert b"fake vLLM" not in out.stderr and not work.exists()


def test_app_opened_on_a_file_refuses_as_check_does(tmp_path, capsys):
    """A file is not a tree to open (the app showed an empty table): usage error, exit 2,
    before anything needs a terminal."""
    (tmp_path / "manifest.json").write_text("{}")
    assert main([str(tmp_path / "manifest.json")]) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err and err.count("\n") == 1


def test_version():
    from eviscene_tui import __version__

    out = subprocess.run([sys.executable, "-m", "eviscene_tui", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"eviscene-tui {__version__}"
