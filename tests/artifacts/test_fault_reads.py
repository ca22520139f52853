"""Faults a hostile tree or a failing disk brings (issue: faults hold): no file in a run
tree can block a reader, be read through a symlink out of the root, or cost more memory
than a real file of its kind.

Each test takes a sample case laid out as the driver writes it, copied (moved) with its
inputs beside it, damages it, and runs every reader the app and ``check`` use on it:
the summary and the integrity check, the case loader (every round file, episodes, the
source trace), the teacher request rebuild and the token captures.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fault_trees import copy_case, one_file_per_kind, opened, real_opens, unblocking

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.layout import discover
from eviscene_tui.artifacts.problems import Problem, ProblemCode
from eviscene_tui.artifacts.report import checked_case
from eviscene_tui.policy.request import RequestUnavailable
from eviscene_tui.policy.casefile import rebuild_for_case
from eviscene_tui.tokens.sources import CaptureError, enumerate_captures, load_capture

CASE = "feedback-converged-3-rounds"


def read_everything(root: Path) -> list[Problem]:
    """What ``check`` and the app read of one case, with every problem they report."""
    problems: list[Problem] = []
    refs, found = discover(root)
    problems += found
    for ref in refs:
        problems += checked_case(ref, root.parent)[1]
    case = load_case(root)
    problems += case.all_problems()
    problems += case.trace()[1]
    for rnd in case.rounds:
        for hint in rnd.episode_paths:
            problems += rnd.episode(hint)[1]
    try:
        rebuild_for_case(case)
    except RequestUnavailable:
        pass
    for ref in enumerate_captures(case):
        try:
            load_capture(case, ref.key)
        except CaptureError:
            pass
    return problems


@pytest.fixture
def case_root(tmp_path: Path) -> Path:
    return copy_case(CASE, tmp_path)


def _inputs(root: Path) -> Path:
    return root.parent / "inputs" / root.name


def _as_fifo(path: Path) -> Path:
    path.unlink()
    os.mkfifo(path)
    return path


def _files(root: Path) -> list[Path]:
    return one_file_per_kind(root, _inputs(root))


# ----------------------------------------------------------------------------- nothing blocks
@pytest.mark.timeout(300)
def test_a_fifo_in_place_of_any_file_is_never_opened(case_root: Path) -> None:
    """Every kind of file of the case and of its inputs in turn replaced by a FIFO (a
    reader that opened one would block forever: the watcher unblocks it so the test
    fails instead of hanging): no reader opens it, and inside the root it is reported."""
    targets = _files(case_root)
    assert len(targets) > 30
    for target in targets:
        saved = target.read_bytes()
        fifo = _as_fifo(target)
        try:
            with unblocking([fifo]) as unblocked, opened() as paths:
                problems = read_everything(case_root)
            rel = fifo.relative_to(case_root.parent)
            assert not unblocked, f"a reader blocked on the FIFO at {rel}"
            assert str(fifo) not in real_opens(paths), f"the FIFO at {rel} was opened"
            if fifo.is_relative_to(case_root):
                hits = [p for p in problems if p.code == ProblemCode.NOT_REGULAR_FILE and Path(p.path) == fifo]
                assert hits, f"no not_regular_file problem for {rel}: {[(p.code, p.path) for p in problems]}"
                assert "FIFO" in hits[0].message and "\n" not in hits[0].message
        finally:
            fifo.unlink()
            target.write_bytes(saved)


@pytest.mark.timeout(120)
def test_check_on_a_case_with_a_fifo_manifest_ends_with_that_problem(case_root: Path) -> None:
    fifo = _as_fifo(case_root / "rounds" / "round-00" / "manifest.json")
    with unblocking([fifo]) as unblocked:
        proc = subprocess.run(
            [sys.executable, "-m", "eviscene_tui", "check", str(case_root)],
            capture_output=True, text=True, timeout=100,
        )
    assert not unblocked
    assert proc.returncode == 1, proc.stderr
    assert "not_regular_file  rounds/round-00/manifest.json: expected a regular file, found a FIFO" in proc.stdout


@pytest.mark.timeout(60)
def test_a_fifo_swapped_in_after_the_check_cannot_block_the_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is checked, then opened non-blocking and the open descriptor checked
    again: a FIFO that the first look missed (here: a stat that lies, as a swap between
    the two would) still cannot block and is refused."""
    from eviscene_tui.artifacts import fileio

    regular = tmp_path / "regular.json"
    regular.write_text("{}")
    fifo = tmp_path / "swapped.json"
    os.mkfifo(fifo)
    real_stat = os.stat
    monkeypatch.setattr(fileio.os, "stat", lambda p, *a, **k: real_stat(regular) if str(p) == str(fifo) else real_stat(p, *a, **k))
    with unblocking([fifo]) as unblocked, pytest.raises(fileio.ReadRefused) as refused:
        fileio.read_regular(fifo)
    assert not unblocked
    assert refused.value.code == ProblemCode.NOT_REGULAR_FILE


@pytest.mark.timeout(60)
def test_a_walked_file_swapped_for_a_fifo_or_a_symlink_is_refused_unblocked(tmp_path: Path) -> None:
    """A file the case's walk saw as regular is opened without a ``stat`` first: a FIFO
    swapped in since still cannot block the open and is refused by the descriptor's
    ``fstat``; a symlink swapped in is not followed (out of the root or not)."""
    from eviscene_tui.artifacts import fileio

    fifo = tmp_path / "manifest.json"
    os.mkfifo(fifo)
    with unblocking([fifo]) as unblocked, pytest.raises(fileio.ReadRefused) as refused:
        fileio.read_regular(str(fifo), walked=True)
    assert not unblocked
    assert refused.value.code == ProblemCode.NOT_REGULAR_FILE
    assert "a FIFO" in refused.value.message

    outside = tmp_path / "outside.json"
    outside.write_text('{"secret": 1}')
    link = tmp_path / "run-inputs.json"
    link.symlink_to(outside)
    with pytest.raises(OSError) as error:
        fileio.read_regular(str(link), walked=True)
    assert not isinstance(error.value, fileio.ReadRefused)
    assert fileio.read_regular(str(outside), walked=True) == b'{"secret": 1}'
    assert fileio.read_regular_if_small(str(outside), 4, walked=True) is None
    assert fileio.read_regular_if_small(str(outside), 13, walked=True) == b'{"secret": 1}'


def test_devices_sockets_and_directories_are_named(tmp_path: Path) -> None:
    import socket

    from eviscene_tui.artifacts import fileio

    sock_path = tmp_path / "s.json"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        cases = {Path("/dev/null"): "a device", sock_path: "a socket", tmp_path: "a directory"}
        for path, what in cases.items():
            with pytest.raises(fileio.ReadRefused) as refused:
                fileio.read_regular(path)
            assert refused.value.code == ProblemCode.NOT_REGULAR_FILE
            assert what in refused.value.message
    finally:
        server.close()


# ----------------------------------------------------------------------------- huge files
def _bytes_read() -> int:
    """Bytes this process has read through system calls so far (``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _sparse(path: Path, size: int) -> None:
    path.unlink()
    with open(path, "wb") as fh:
        fh.truncate(size)


GiB = 1 << 30


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("rel", "size"),
    [
        ("rounds/round-00/run-inputs.json", 2 * GiB),
        ("manifest.json", 2 * GiB),
        ("requests/round-00.json", 2 * GiB),
        ("rounds/round-00/repair_attempts.jsonl", 2 * GiB),
        ("rounds/round-00/episodes/hint-00-teacher.json", 3 * GiB),
        ("search-state.json", 3 * GiB),
        ("../inputs/feedback-converged-3-rounds/trace.json", 3 * GiB),
    ],
)
def test_a_file_bigger_than_any_of_its_kind_is_refused_unread(case_root: Path, rel: str, size: int) -> None:
    """A sparse file far beyond what a real file of its kind holds (a 2 GiB
    run-inputs.json; a trace past 2 GiB) is a ``file_too_large`` problem and is never
    read: every reader together reads a few MB of the case, not gigabytes."""
    target = (case_root / rel).resolve()
    _sparse(target, size)
    before = _bytes_read()
    problems = read_everything(case_root)
    read = _bytes_read() - before
    assert read < 256 << 20, f"{read >> 20} MiB read"
    hits = [p for p in problems if p.code == ProblemCode.FILE_TOO_LARGE and Path(p.path) == target]
    assert hits, [(p.code, p.path, p.message) for p in problems]
    assert "GiB" in hits[0].message and "not read" in hits[0].message


def test_the_limits_are_one_table_by_kind() -> None:
    from eviscene_tui.artifacts.fileio import LIMITS, MiB, limit_for

    assert limit_for("/x/rounds/round-00/run-inputs.json") == LIMITS["config"] <= 8 * MiB
    assert limit_for("/x/requests/round-03.json") == LIMITS["feedback"]
    assert limit_for("/x/rounds/round-00/continuations/hint-00.json") == LIMITS["trace"]
    assert limit_for("/x/runtime/c/a/artifacts/sha256/ab/" + "a" * 64 + ".png") == LIMITS["blob"]
    assert limit_for("/x/runtime/c/a/artifacts/sha256/ab/" + "a" * 64 + ".meta.json") == LIMITS["config"]
    assert limit_for("/x/repair_attempts.jsonl.gz") == LIMITS["ledger"]


def test_a_small_gzip_ledger_cannot_expand_without_bound(tmp_path: Path) -> None:
    import gzip

    from eviscene_tui.artifacts.fileio import ReadRefused, gunzip_capped

    data = gzip.compress(b"\n" * (8 << 20))
    assert len(data) < 64 << 10
    with pytest.raises(ReadRefused):
        gunzip_capped(data, "x.jsonl.gz", 1 << 20)
    assert gunzip_capped(data, "x.jsonl.gz", 16 << 20) == b"\n" * (8 << 20)
    assert gunzip_capped(gzip.compress(b"a") + gzip.compress(b"b"), "x.jsonl.gz") == b"ab"


# ----------------------------------------------------------------------------- nothing outside through the root
@pytest.mark.timeout(300)
def test_a_symlink_out_of_the_root_is_reported_once_and_never_opened(case_root: Path, tmp_path: Path) -> None:
    """Every kind of file the run wrote in turn replaced by a symlink to a copy of it
    outside the root: it is ``path_outside_root`` (once: no ``missing_artifact``, no
    hash mismatch naming the outside file's sha, no torn line parsed from it), and no
    reader opens the outside file."""
    outside_dir = tmp_path / "elsewhere"
    outside_dir.mkdir()
    for target in one_file_per_kind(case_root):
        outside = outside_dir / target.name
        outside.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n" if target.suffix == ".jsonl" else target.read_bytes())
        saved = target.read_bytes()
        target.unlink()
        target.symlink_to(outside)
        try:
            with opened() as paths:
                problems = read_everything(case_root)
            rel = target.relative_to(case_root)
            assert str(outside) not in real_opens(paths), f"the outside file behind {rel} was opened"
            about = {(p.code, p.path) for p in problems if Path(p.path) == target or str(outside) in p.message}
            assert about == {(ProblemCode.PATH_OUTSIDE_ROOT, str(target))}, f"{rel}: {about}"
        finally:
            target.unlink()
            target.write_bytes(saved)
            outside.unlink()


def _original_and_copy(tmp_path: Path) -> tuple[Path, Path]:
    """A search written on this machine at ``orig/search-a`` (so its recorded absolute
    paths exist here) and an rsync copy of it, with the inputs beside, at ``copy/``."""
    import shutil

    import test_integrity_fixtures as fx

    orig = tmp_path / "orig" / "search-a"
    fx.build_search(orig, str(orig))
    copy = tmp_path / "copy" / "search-a"
    shutil.copytree(orig.parent, copy.parent, symlinks=True)
    return orig, copy


def test_a_moved_copy_never_reads_the_original_for_a_file_the_run_wrote(tmp_path: Path) -> None:
    """``round-inputs/round-00/media.json`` deleted from the copy: it is missing there,
    and the original's, still at the recorded absolute path, is not read instead."""
    from eviscene_tui.artifacts.integrity import check_case
    from eviscene_tui.artifacts.layout import CaseRef, Layout

    orig, copy = _original_and_copy(tmp_path)
    (copy / "round-inputs" / "round-00" / "media.json").unlink()
    with opened() as paths:
        problems = check_case(CaseRef(copy, Layout.FEEDBACK_SEARCH))
        case = load_case(copy)
        case.all_problems()
        rows = case.input_provenance(verify=True)
    original = str(orig / "round-inputs" / "round-00" / "media.json")
    assert original not in real_opens(paths)
    missing = [p for p in problems if p.code == ProblemCode.MISSING_ARTIFACT]
    assert any(p.path == str(copy / "round-inputs" / "round-00" / "media.json") for p in missing), missing
    assert all(r.found != original for r in rows)
    # the driver's own inputs are still read wherever they are found (here: as recorded)
    trace = next(r for r in rows if r.key == "trace")
    assert trace.found is not None and trace.sha_status == "verified"


def test_a_path_map_covering_the_root_does_not_move_the_runs_own_files(tmp_path: Path) -> None:
    """``--path-map OLD=NEW`` with OLD above the case root (meant for the inputs beside
    it) leaves the case's own ``rounds/…`` files where the tree is: no false
    ``path_outside_root``, and the inputs are found through the map."""
    import shutil

    from eviscene_tui.artifacts.integrity import check_case
    from eviscene_tui.artifacts.layout import CaseRef, Layout
    from eviscene_tui.artifacts.paths import PathMap

    orig, copy = _original_and_copy(tmp_path)
    inputs_elsewhere = tmp_path / "archive"
    shutil.move(str(copy.parent / "inputs"), str(inputs_elsewhere / "inputs"))
    shutil.rmtree(orig.parent)
    path_map = PathMap.parse([f"{orig.parent}={inputs_elsewhere}"])
    problems = check_case(CaseRef(copy, Layout.FEEDBACK_SEARCH), path_map=path_map)
    assert problems == [], [(p.code, p.path, p.message) for p in problems]
    rows = load_case(copy, path_map=path_map).input_provenance(verify=True)
    trace = next(r for r in rows if r.key == "trace")
    assert trace.found is not None and trace.found.startswith(str(inputs_elsewhere)) and trace.rule == "path map"


def test_a_media_symlink_out_of_the_root_is_one_problem(case_root: Path, tmp_path: Path) -> None:
    """The image a record binds, replaced by a symlink out of the root: one fault, one
    problem (``path_outside_root``), not also a ``missing_artifact`` for the same image."""
    from eviscene_tui.artifacts.integrity import check_case
    from eviscene_tui.artifacts.layout import CaseRef, Layout

    image = next((case_root / "rounds" / "round-00" / "media").glob("*.image"))
    outside = tmp_path / "image.png"
    outside.write_bytes(image.read_bytes())
    image.unlink()
    image.symlink_to(outside)
    problems = check_case(CaseRef(case_root, Layout.FEEDBACK_SEARCH))
    assert [(p.code, p.path) for p in problems] == [(ProblemCode.PATH_OUTSIDE_ROOT, str(image))]


def test_a_wrapper_case_input_symlinked_out_is_refused_once(tmp_path: Path) -> None:
    """The multi-case wrapper's ``case-inputs/<key>/`` is not walked with the case: a
    symlink there that leaves the wrapper is still never opened, and said once."""
    import shutil

    from eviscene_tui.artifacts.report import build_check_report
    from fault_trees import SAMPLES

    dest = tmp_path / "sample_runs"
    shutil.copytree(SAMPLES / "multi-case", dest / "multi-case", symlinks=True)
    for inputs in (SAMPLES / "inputs").glob("multi-case-*"):
        shutil.copytree(inputs, dest / "inputs" / inputs.name, symlinks=True)
    target = next((dest / "multi-case" / "case-inputs").glob("*/candidate.json"))
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(outside)
    with opened() as paths:
        report = build_check_report(dest / "multi-case", "multi-case", workers=1)
    assert str(outside) not in real_opens(paths)
    about = [p for c in report["cases"] for p in c["problems"] if p["path"].endswith(str(target.relative_to(dest / "multi-case")))]
    about += [p for p in report["problems"] if p["path"].endswith(str(target.relative_to(dest / "multi-case")))]
    assert {p["code"] for p in about} == {"path_outside_root"}, about
