"""Trees laid out as the driver writes them (inputs beside the roots, absolute paths),
then moved elsewhere with the original location removed: the same answers before and
after the move; bound inputs verified wherever they are; written paths never followed
out of the root; a tree copied without its inputs gives one clear message per input."""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import generate_samples

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.artifacts.integrity import check_case
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.paths import PathMap
from eviscene_tui.artifacts.report import build_check_report
from eviscene_tui.scaffold.samples import EXPECTED, copy_case
from eviscene_tui.scaffold.samples.cases import ESCAPE_TARGET
from eviscene_tui.scaffold.samples.expected import COPIED_WITHOUT_INPUTS_MISSING

REPO = Path(__file__).resolve().parents[2]


def written_tree(base: Path) -> Path:
    """sample_runs generated as if the driver had written it right here (every recorded
    absolute path names ``base``)."""
    root = base / "exp" / "sample_runs"
    generate_samples(root, base=str(root))
    return root


def shape(report: dict[str, Any], *, messages: bool = True) -> list[dict[str, Any]]:
    """What must not change when a tree moves: per case its status and counts, and every
    problem's code and (PATH-relative) path; messages too, except a missing input's,
    which names the locations it was looked for at."""
    out = []
    for c in report["cases"]:
        problems = sorted(
            (p["code"], p["path"], "" if not messages or "not found:" in p["message"] else p["message"]) for p in c["problems"]
        )
        out.append({k: c[k] for k in ("path", "layout", "status", "rounds", "attempts", "accepted", "pending")} | {"problems": problems})
    return out


@contextlib.contextmanager
def opened_files() -> Iterator[list[str]]:
    """Every file opened through ``open`` / ``io.open`` / ``os.open`` in the block (absolute, real)."""
    seen: list[str] = []
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def note(file: Any) -> None:
        if isinstance(file, (str, bytes, os.PathLike)):
            try:
                seen.append(os.path.realpath(os.fsdecode(file)))
            except (TypeError, ValueError):
                pass

    def fake_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        note(file)
        return real_open(file, *args, **kwargs)

    def fake_os_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        note(path)
        return real_os_open(path, *args, **kwargs)

    builtins.open = fake_open  # type: ignore[assignment]  # a test double
    io.open = fake_open  # type: ignore[assignment]  # a test double
    os.open = fake_os_open  # type: ignore[assignment]  # a test double
    try:
        yield seen
    finally:
        builtins.open, io.open, os.open = real_open, real_io_open, real_os_open  # type: ignore[assignment]  # a test double
def test_check_is_the_same_before_and_after_a_move(tmp_path: Path) -> None:
    original = written_tree(tmp_path / "cluster")
    before = build_check_report(original, "sample_runs", workers=1)
    # rsync the whole experiment folder elsewhere, renamed, and remove the original
    moved = tmp_path / "laptop" / "home" / "me" / "runs-copy"
    moved.parent.mkdir(parents=True)
    shutil.move(str(original), str(moved))
    shutil.rmtree(tmp_path / "cluster")
    after = build_check_report(moved, "sample_runs", workers=1)
    assert shape(after) == shape(before)
    # and both say exactly what the committed samples are built to show
    for case in after["cases"]:
        assert sorted({p["code"] for p in case["problems"]}) == EXPECTED[case["path"]]["problems"], case["path"]
    # the committed samples (written at a fictitious /data/eviscene) give the same answers
    # (their files name another location, so the hashes quoted in messages differ)
    committed = build_check_report(REPO / "sample_runs", "sample_runs", workers=1)
    assert shape(committed, messages=False) == shape(after, messages=False)


def test_moved_case_reads_its_inputs_beside_it(tmp_path: Path) -> None:
    original = written_tree(tmp_path / "cluster")
    moved = tmp_path / "copy" / "sample_runs"
    moved.parent.mkdir()
    shutil.move(str(original), str(moved))
    case = load_case(moved / "feedback-converged-3-rounds")
    trace, problems = case.trace()
    assert trace is not None and problems == []
    assert trace.path == moved / "inputs" / "feedback-converged-3-rounds" / "trace.json"
    site = case.failure_site()
    assert site is not None and site.source_step_index is not None
    req, probs = case.source_step_request(site.source_step_index)
    assert req is not None and req.source == "archive" and req.images, probs
    store = case.source_runtime_store()
    assert store is not None and store.path.is_relative_to(moved / "inputs" / "feedback-converged-3-rounds" / "runtime")
    prov = {p.key: p for p in case.input_provenance(verify=True)}
    assert prov["trace"].rule == "moved tree" and prov["trace"].inside_root is False and prov["trace"].sha_status == "verified"
    assert str(tmp_path / "cluster") in prov["trace"].detail and str(tmp_path / "copy") in prov["trace"].detail
    assert prov["source_runtime"].found is not None
    assert case.problems == []


def test_relative_runtime_paths_resolve_against_the_working_directories(tmp_path: Path) -> None:
    # the legacy cases record runtime paths relative to the writer's working directory
    moved = tmp_path / "elsewhere" / "sample_runs"
    generate_samples(moved, cases=["single-generating"])  # written at /data/eviscene, so every path goes through the move
    case = load_case(moved / "single-generating")
    trace, _ = case.trace()
    assert trace is not None and not trace.runtime_store.runtime_path.startswith("/")
    assert case.source_runtime_store() is not None
    hint_store = trace and case.rounds[0].runtime_store_dirs()[0]
    rel_to_driver_cwd = os.path.relpath(hint_store, moved.parent)  # sample_runs/single-generating/runtime/...
    store = case.runtime_store_for(rel_to_driver_cwd)
    assert store is not None and store.path == hint_store


def test_bound_input_edited_after_the_run_is_file_hash_mismatch(tmp_path: Path) -> None:
    moved = tmp_path / "copy" / "sample_runs"
    generate_samples(moved, cases=["hostile-strings"])
    gold = moved / "inputs" / "hostile-strings" / "gold.json"
    gold.write_bytes(gold.read_bytes().replace(b'"privileged": true', b'"privileged": false'))
    problems = check_case(CaseRef(moved / "hostile-strings", Layout.SINGLE_RUN))
    assert [p.code for p in problems] == ["file_hash_mismatch"]
    assert problems[0].path == str(gold) and "gold" in problems[0].message
    prov = {p.key: p for p in load_case(moved / "hostile-strings").input_provenance(verify=True)}
    assert prov["gold"].sha_status == "mismatch" and prov["trace"].sha_status == "verified"


def test_tree_copied_without_inputs_says_what_is_missing_and_keeps_working(tmp_path: Path) -> None:
    samples = tmp_path / "s"
    generate_samples(samples, cases=["feedback-converged-3-rounds"])
    root = copy_case(samples, "feedback-converged-3-rounds", tmp_path / "copy", with_inputs=False)
    problems = check_case(CaseRef(root, Layout.FEEDBACK_SEARCH))
    assert {p.code for p in problems} == {"missing_artifact"}
    missing = [p for p in problems if "not found:" in p.message]
    assert len(missing) == len(problems)
    # one message per input (the trace is bound by the search and by every round)
    assert len({p.path for p in missing}) == len(missing) == len(COPIED_WITHOUT_INPUTS_MISSING)
    for p in missing:
        assert p.path.startswith(str(tmp_path / "copy" / "inputs"))  # where it was looked for
        assert "/data/eviscene/sample_runs/inputs/feedback-converged-3-rounds/" in p.message  # where it was written
    case = load_case(root)
    trace, tprobs = case.trace()
    assert trace is None and "source trace not found" in tprobs[0].message
    assert case.failure_site() is not None and len(case.attempts) == 3
    ep, _ = case.rounds[2].episode(0)
    assert ep is not None and ep.step_count > 0  # the run's own files still show
    assert all(p.found is None for p in case.input_provenance() if p.key != "search_media")
    # an explicit mapping to where the inputs are fixes it
    mapped = load_case(root, path_map=PathMap.parse([f"/data/eviscene/sample_runs/inputs={samples}/inputs"]))
    assert mapped.trace()[0] is not None
    assert {p.key: p for p in mapped.input_provenance()}["trace"].rule == "path map"
    clean = check_case(CaseRef(root, Layout.FEEDBACK_SEARCH), path_map=mapped.path_map)
    assert clean == []


def test_escaping_written_path_is_refused_and_never_read(tmp_path: Path) -> None:
    samples = tmp_path / "copy" / "sample_runs"
    generate_samples(samples, cases=["damaged", ESCAPE_TARGET.split("/")[1]])
    target = (samples / ESCAPE_TARGET).resolve()
    assert target.is_file()
    root = samples / "damaged"
    with opened_files() as seen:
        problems = check_case(CaseRef(root, Layout.FEEDBACK_SEARCH))
        case = load_case(root)
        case.all_problems()
        for r in case.rounds:
            for n in r.episode_paths:
                r.episode(n)
        case.source_step_request(case.failure_site().source_step_index)
        case.input_provenance(verify=True)
    hit = [p for p in problems if p.code == "path_outside_root"]
    assert hit and "round-00/repair_attempts.jsonl" in hit[0].path and "private-context.json" in hit[0].message
    assert str(target) not in seen
    # the damaged case's own private context is a bound input: that one may be read
    assert str((samples / "inputs" / "damaged" / "private-context.json").resolve()) in seen


def test_report_passes_the_path_map_to_every_case(tmp_path: Path) -> None:
    samples = tmp_path / "s"
    generate_samples(samples, cases=["hostile-strings"])
    dest = tmp_path / "only-runs"
    copy_case(samples, "hostile-strings", dest, with_inputs=False)
    plain = build_check_report(dest, "x", workers=1)
    assert {p["code"] for p in plain["cases"][0]["problems"]} == {"missing_artifact"}
    mapped = build_check_report(dest, "x", workers=1, path_map=PathMap.parse([f"/data/eviscene/sample_runs={samples}"]))
    assert mapped["cases"][0]["problems"] == []


@pytest.mark.parametrize("value", ["/data/x=", "=/home/y", "no-equals"])
def test_bad_path_map_values(value: str) -> None:
    with pytest.raises(ValueError, match="OLD=NEW"):
        PathMap.parse([value])


def test_relative_output_dir_is_placed_by_the_media_paths(tmp_path: Path) -> None:
    """A single run started with a relative --output-dir: run-inputs records it relative,
    but psd_media.image_paths are absolute and still tell where the run was written."""
    import orjson

    from eviscene_tui.artifacts.jsonio import encode_bound

    moved = tmp_path / "copy" / "sample_runs"
    generate_samples(moved, cases=["hostile-strings"])
    root = moved / "hostile-strings"
    doc = orjson.loads((root / "run-inputs.json").read_bytes())
    ident = dict(doc["identity"], output_dir="sample_runs/hostile-strings")
    for name, data in encode_bound(root / "run-inputs.json", ident, doc["payload"]).items():
        (root / name).write_bytes(data)
    problems = check_case(CaseRef(root, Layout.SINGLE_RUN))
    # the identity changed, so the continuation's identity hash no longer matches: that is all
    assert {p.code for p in problems} == {"bound_hash_mismatch"}, problems
    case = load_case(root)
    assert case.trace()[0] is not None
    assert {p.key: p for p in case.input_provenance()}["trace"].rule == "moved tree"


def test_wrapper_case_inputs_are_verified_after_a_move(tmp_path: Path) -> None:
    from eviscene_tui.scaffold.samples.expected import MULTI_CONVERGED_KEY

    moved = tmp_path / "copy" / "sample_runs"
    generate_samples(moved, cases=["multi-case"])
    ref = CaseRef(moved / "multi-case" / "repairs" / MULTI_CONVERGED_KEY, Layout.FEEDBACK_SEARCH,
                  wrapper=moved / "multi-case", key=MULTI_CONVERGED_KEY)
    assert check_case(ref) == []
    gold = moved / "multi-case" / "case-inputs" / MULTI_CONVERGED_KEY / "gold.json"
    gold.write_bytes(gold.read_bytes().replace(b"privileged", b"Privileged"))
    hit = [p for p in check_case(ref) if p.code == "file_hash_mismatch"]
    assert [p.path for p in hit] == [str(gold)] and "wrapper case input gold" in hit[0].message
