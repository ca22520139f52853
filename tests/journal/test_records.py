"""Record keys and where records are read: the same key whichever folder is looked from
and after a move; every work directory this app wrote for a case is found again."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from eviscene_tui.artifacts.identity import read_identity
from eviscene_tui.journal.records import (
    CaseRecords,
    RecordIndex,
    find_supervised_root,
    location_key,
    read_workdirs,
    record_key,
    register_workdir,
    registered_workdirs,
    registry_path,
)

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="sample_runs not generated")


def _copy(name: str, dest: Path) -> Path:
    from eviscene_tui.scaffold.samples import copy_case

    return copy_case(SAMPLES, name, dest)


def test_the_key_comes_from_the_identity_and_survives_a_move(tmp_path):
    case = _copy("search-no-recoverable-site", tmp_path / "a" / "runs")
    rk = record_key(case)
    assert rk.basis == "identity" and rk.key.startswith("id-") and rk.follows_moves
    assert rk.source == "search-state.json identity"
    moved = tmp_path / "elsewhere" / "deep" / "renamed-case"
    moved.parent.mkdir(parents=True)
    shutil.move(str(case), moved)
    again = record_key(moved)
    assert again.key == rk.key
    assert again.aliases == (location_key(moved),) and location_key(moved) != location_key(case)
    single = record_key(_copy("single-generating", tmp_path / "b"))
    assert single.key.startswith("id-") and single.source == "run-inputs.json identity"


@pytest.mark.parametrize("name", ["feedback-converged-3-rounds", "search-no-recoverable-site"])  # gzip pointer, plain envelope
def test_the_identity_is_read_from_the_head_of_a_torn_search_state(tmp_path, name):
    case = _copy(name, tmp_path / "runs")
    whole = read_identity(case)
    state = case / "search-state.json"
    data = state.read_bytes()
    state.write_bytes(data[: len(data) - 40])  # the driver rewrites it in place: a crash leaves a torn tail
    torn = read_identity(case)
    assert whole is not None and torn is not None and torn.sha256 == whole.sha256
    assert torn.output_dir == f"/data/eviscene/sample_runs/{name}"


def test_a_case_without_an_identity_is_keyed_by_its_location_and_says_so(tmp_path):
    case = tmp_path / "runs" / "crashed-before-first-write"
    case.mkdir(parents=True)
    (case / "manifest.json").write_text('{"status": "generating"}')
    rk = record_key(case)
    assert rk.basis == "location" and rk.key == location_key(case) and not rk.follows_moves
    assert "do not follow it when it is moved" in rk.describe()


def test_read_workdirs_ancestors_and_the_registry(tmp_path):
    case = _copy("single-generating", tmp_path / "exp" / "runs")
    rk = record_key(case)
    beside_case = Path(f"{case}.eviscene-tui")
    of_tree = tmp_path / "exp" / "runs.eviscene-tui"
    of_exp = tmp_path / "exp.eviscene-tui"
    explicit = tmp_path / "somewhere" / "records"
    for d in (beside_case, of_tree, of_exp, explicit):
        d.mkdir(parents=True)
    assert read_workdirs([case]) == [beside_case.resolve(), of_tree.resolve(), of_exp.resolve()]
    assert explicit.resolve() not in read_workdirs([case], keys=rk.keys)
    assert register_workdir(explicit, rk, case) and not register_workdir(explicit, rk, case)  # once
    assert registry_path().is_file() and str(tmp_path) not in str(registry_path().parent.parent.parent / "never")
    line = orjson.loads(registry_path().read_bytes().splitlines()[-1])
    assert line["key"] == rk.key and line["workdir"] == str(explicit.resolve()) and line["case"] == str(case.resolve())
    assert registered_workdirs(rk.keys) == [explicit.resolve()]
    got = read_workdirs([case], tmp_path / "not-yet", rk.keys)
    assert got[-1] == explicit.resolve() and (tmp_path / "not-yet") not in got  # a work dir not written yet is not read


def test_the_index_maps_an_earlier_versions_path_keys(tmp_path):
    tree = tmp_path / "exp"
    a = _copy("search-no-recoverable-site", tree / "runs-A")
    b = _copy("single-generating", tree / "runs-A")
    cases = [CaseRecords("x", str(a), record_key(a)), CaseRecords("y", str(b), record_key(b))]
    index = RecordIndex(cases, opened=tree / "runs-A")
    assert index.resolve(record_key(a).key, tmp_path / "anything").ident == "x"
    assert index.resolve(location_key(b), tmp_path / "anything").ident == "y"  # an alias
    # keys relative to the tree the work directory sat beside
    assert index.resolve("runs-A/search-no-recoverable-site", tmp_path / "exp.eviscene-tui").ident == "x"
    assert index.resolve("search-no-recoverable-site", tree / "runs-A.eviscene-tui").ident == "x"
    # a lone case's own work directory keyed it by its folder name
    assert index.resolve("single-generating", tree / "runs-A" / "single-generating.eviscene-tui").ident == "y"
    assert index.resolve("search-no-recoverable-site", tree / "runs-B.eviscene-tui") is None
    # an explicit --workdir of an earlier version: relative to the opened folder or an ancestor
    assert index.resolve("runs-A/single-generating", tmp_path / "my-wd").ident == "y"
    assert index.resolve("id-" + "0" * 20, tmp_path / "w") is None


def test_supervised_searches_are_found_by_key_and_by_an_earlier_name(tmp_path):
    from eviscene_tui.journal.paths import case_key

    case = _copy("search-no-recoverable-site", tmp_path / "runs")
    rk = record_key(case)
    new = tmp_path / "w1" / "supervised" / rk.key
    old = tmp_path / "runs.eviscene-tui" / "supervised" / case_key("search-no-recoverable-site")
    assert find_supervised_root(case, rk, [tmp_path / "w1", tmp_path / "runs.eviscene-tui"]) is None
    old.mkdir(parents=True)
    (old / "search-state.json").write_text("{}")
    assert find_supervised_root(case, rk, [tmp_path / "w1", tmp_path / "runs.eviscene-tui"]) == old
    new.mkdir(parents=True)
    (new / "search-state.json").write_text("{}")
    assert find_supervised_root(case, rk, [tmp_path / "w1", tmp_path / "runs.eviscene-tui"]) == new


def test_case_records_gathers_one_case_from_everywhere(tmp_path):
    from eviscene_tui.journal.review import add_triage_label, open_review_journal
    from eviscene_tui.state.triage import case_records

    case = _copy("search-no-recoverable-site", tmp_path / "runs")
    rk = record_key(case)
    j = open_review_journal(tmp_path / "runs.eviscene-tui", operator="op")
    add_triage_label(j, rk.key, "localizer_miss", "from the tree")
    j.close()
    sroot = tmp_path / "scratch" / "supervised" / rk.key
    sroot.mkdir(parents=True)
    (sroot / "search-state.json").write_text("{}")
    register_workdir(tmp_path / "scratch", rk, case)
    got = case_records(case, tmp_path / "w-of-a-headless-command")
    assert got.record.key == rk.key and got.triage is not None and got.triage.label == "localizer_miss"
    assert got.search_root is not None and got.search_root.resolve() == sroot.resolve()  # an earlier version's search
    assert (tmp_path / "runs.eviscene-tui").resolve() in got.workdirs
    repair = tmp_path / "scratch" / "repairs" / rk.key  # the bundled driver's search goes first
    repair.mkdir(parents=True)
    (repair / "search-state.json").write_text("{}")
    again = case_records(case, tmp_path / "w-of-a-headless-command")
    assert again.search_root is not None and again.search_root.resolve() == repair.resolve()


def test_a_fifo_or_a_link_out_of_the_root_is_never_opened_for_the_key(tmp_path):
    import os

    case = _copy("search-no-recoverable-site", tmp_path / "runs")
    state = case / "search-state.json"
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(state.read_bytes())
    state.unlink()
    os.mkfifo(state)  # an open() of it would never return
    assert record_key(case).basis == "location"
    state.unlink()
    state.symlink_to(outside)  # what the run wrote must stay in its root
    assert read_identity(case) is None
