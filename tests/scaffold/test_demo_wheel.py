"""The demo where users install the app: the built wheel, installed into a fresh venv
outside the checkout, runs ``eviscene-tui demo`` from another folder; its first run builds
the samples in the user's data directory (there is no Makefile there) and opens them.

Offline and quick: the wheel is built with ``pip wheel --no-deps`` (through the package
index pip is configured with, for the build backend), and the scratch venv gets the
dependencies by a path entry to this venv's site-packages — a plain path line, so the
checkout's editable install there is not loaded: the code that runs is the wheel's."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

from test_ui_pty import run_in_pty

REPO = Path(__file__).resolve().parents[2]


def tree_digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _backend_here() -> bool:
    """This venv has the build backend pyproject asks for (then no index is needed)."""
    try:
        setuptools = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    return importlib.util.find_spec("wheel") is not None and int(setuptools.split(".")[0]) >= 68


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the sources (the build writes ``build/`` and ``*.egg-info``
    into the tree it builds: never into the checkout)."""
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    shutil.copytree(REPO / "eviscene_tui", src / "eviscene_tui", ignore=ignore)
    shutil.copytree(REPO / "themes", src / "themes", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    # without the network: the build backend from this venv when it has one, else pip's index
    isolation = ["--no-build-isolation"] if _backend_here() else []
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", *isolation, "-w", str(tmp_path / "dist"), str(src)],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    (wheel,) = (tmp_path / "dist").glob("eviscene_tui-*.whl")
    return wheel


def _scratch_venv(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    Path(purelib, "test-dependencies.pth").write_text("".join(p + "\n" for p in deps))
    out = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    return venv


def test_the_wheel_s_demo_builds_its_samples_in_the_data_directory_and_opens_them(tmp_path, monkeypatch):
    venv = _scratch_venv(tmp_path, _build_wheel(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no sample_runs/, no Makefile here
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import eviscene_tui; print(eviscene_tui.__file__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), where  # the wheel's code, not the checkout's
    script = str(venv / "bin" / "eviscene-tui")
    helped = subprocess.run([script, "demo", "--help"], capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "user data dir" in helped.stdout, helped.stdout + helped.stderr

    samples = data / "eviscene-tui" / "sample_runs"
    # the runs screen counts the cases once they are listed; q quits (ctrl+q if q went elsewhere)
    output, status = run_in_pty(["demo"], [(b" cases", b"q"), (None, b"\x11")], program=script, timeout=240)
    first = output.split(b"\n", 1)[0].decode(errors="replace")
    assert first.startswith(f"sample runs: {samples} (building them now"), output[-2000:]
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, output[-2000:]
    assert b"Traceback" not in output
    assert tree_digest(samples) == tree_digest(REPO / "sample_runs")  # what `make samples` writes
    assert (data / "eviscene-tui" / "sample_runs.eviscene-tui" / "demo").is_dir()  # the demo wrote beside its samples
    assert not (elsewhere / "sample_runs").exists() and list(elsewhere.iterdir()) == []
