"""Hypothesis: random bytes and mutated JSON in place of case files -> check never raises."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import test_integrity_fixtures as fx

from eviscene_tui.artifacts.integrity import check_case
from eviscene_tui.artifacts.layout import CaseRef, Layout, classify, discover
from eviscene_tui.artifacts.problems import Problem, ProblemCode
from eviscene_tui.artifacts.report import build_check_report
from eviscene_tui.artifacts.summary import summarize_case

TARGETS = [
    "manifest.json",
    "search-state.json",
    "repair_attempts.jsonl",
    "repair_candidates.jsonl",
    "requests/round-00.json",
    "round-inputs/round-00/media.json",
    "rounds/round-00/manifest.json",
    "rounds/round-00/run-inputs.json",
    "rounds/round-00/repair_attempts.jsonl",
    "rounds/round-00/continuations/hint-00.json",
    "rounds/round-00/gemini-verification-bundle.json",
    "rounds/round-00/semantic-localization.json",
    "rounds/round-00/hint-proposals.json",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
KEYS = ["status", "payload", "identity", "payload_sha256", "rounds", "files", "records", "continuation",
        "hinted_teacher_episode_trace", "psd_media", "student_prompt_ids", "teacher_prompt_ids", "schema_version",
        "repair_rollout_token_capture", "local_verification", "accepted", "episodes", "attempts", "output_dir",
        "directory", "teacher_steps", "archive", "image_sha256", "path", "sha256", "repair_site"]


@pytest.fixture(scope="module")
def base_case(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("fuzzbase") / "s"
    fx.build_search(base)
    return base


def _mutate(value, path: list, new):
    """Replace the value at a key path (creating keys on objects), tolerating any shape."""
    if not path:
        return new
    if isinstance(value, dict):
        key = path[0]
        value = dict(value)
        value[key] = _mutate(value.get(key), path[1:], new)
        return value
    if isinstance(value, list) and value:
        value = list(value)
        value[0] = _mutate(value[0], path, new)
        return value
    return new


def _assert_sane(root: Path, problems) -> None:
    for p in problems:
        assert isinstance(p, Problem) and p.code in set(ProblemCode)
        assert "stopped early" not in p.message, p.message  # no internal exception was swallowed


def _check_all(root: Path) -> list[Problem]:
    layout = classify(root) or Layout.UNKNOWN
    ref = CaseRef(root, layout)
    problems = check_case(ref)
    _assert_sane(root, problems)
    summary = summarize_case(ref, root.parent)
    _assert_sane(root, summary.problems)
    report = build_check_report(root.parent, "x", workers=1)
    assert report["summary"]["cases"] >= 1
    return problems


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(target=st.sampled_from(TARGETS), data=st.binary(max_size=300))
def test_random_bytes(tmp_path_factory, base_case: Path, target: str, data: bytes) -> None:
    work = tmp_path_factory.mktemp("fz") / "s"
    shutil.copytree(base_case, work, symlinks=True)
    original = (work / target).read_bytes()
    (work / target).write_bytes(data)
    problems = _check_all(work)
    if data != original:
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            parsed = None
            if not target.endswith(".jsonl") or any(line.strip() for line in data.split(b"\n")):
                assert problems, f"random bytes in {target} gave no problem"
        del parsed


@SETTINGS
@given(
    target=st.sampled_from([t for t in TARGETS if t.endswith(".json")]),
    key_path=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4),
    new=json_values,
)
def test_mutated_json(tmp_path_factory, base_case: Path, target: str, key_path: list, new) -> None:
    work = tmp_path_factory.mktemp("fz") / "s"
    shutil.copytree(base_case, work, symlinks=True)
    doc = orjson.loads((work / target).read_bytes())
    try:
        mutated = orjson.dumps(_mutate(doc, key_path, new))
    except TypeError:
        mutated = orjson.dumps(doc)
    (work / target).write_bytes(mutated)
    _check_all(work)


@SETTINGS
@given(
    target=st.sampled_from([t for t in TARGETS if t.endswith(".jsonl")]),
    key_path=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4),
    new=json_values,
)
def test_mutated_jsonl_rows(tmp_path_factory, base_case: Path, target: str, key_path: list, new) -> None:
    work = tmp_path_factory.mktemp("fz") / "s"
    shutil.copytree(base_case, work, symlinks=True)
    rows = [orjson.loads(x) for x in (work / target).read_bytes().split(b"\n") if x.strip()]
    rows = [_mutate(r, key_path, new) for r in rows]
    try:
        data = b"".join(orjson.dumps(r) + b"\n" for r in rows)
    except TypeError:
        return
    (work / target).write_bytes(data)
    _check_all(work)


@settings(max_examples=20, deadline=None)
@given(files=st.dictionaries(st.sampled_from(["manifest.json", "run-inputs.json", "search-state.json",
                                               "slate-state.json", "repair_attempts.jsonl"]),
                             st.binary(max_size=120), max_size=4))
def test_random_folder(tmp_path_factory, files: dict) -> None:
    root = tmp_path_factory.mktemp("rf")
    case = root / "case"
    case.mkdir()
    for name, data in files.items():
        (case / name).write_bytes(data)
    cases, problems = discover(root)
    for ref in cases:
        _assert_sane(ref.path, check_case(ref))
        summarize_case(ref, root)
    build_check_report(root, "r", workers=1)


# ----------------------------------------------------------------------------- realistic samples
@pytest.fixture(scope="module")
def sample_case(tmp_path_factory) -> Path | None:
    """One realistic case from the sample generator (skipped when it is unavailable)."""
    try:  # one case is enough; fall back to the whole tree if the builder API changes
        from eviscene_tui.scaffold.samples.cases import hostile_strings
        from eviscene_tui.scaffold.samples.tree import Tree

        tree = Tree()
        hostile_strings(tree)
    except Exception:  # noqa: BLE001 - the one-case builder is optional; the whole tree is the fallback
        try:
            from eviscene_tui.scaffold.samples import build
        except ImportError:
            pytest.skip("sample generator not available")
        tree = build()
    prefix = "hostile-strings/"
    inputs = "inputs/hostile-strings/"  # the case's driver inputs, beside its root
    dest = tmp_path_factory.mktemp("sample") / "case"
    for rel, data in tree.files.items():
        if rel.startswith(prefix):
            path = dest / rel[len(prefix):]
        elif rel.startswith(inputs):
            path = dest.parent / rel
        else:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if not any(dest.iterdir()):
        pytest.skip("sample case not generated")
    return dest


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.integers(0, 10_000), cut=st.floats(0, 1), flip=st.integers(0, 255), mode=st.sampled_from(["truncate", "flip", "empty"]))
def test_mutated_sample_files(tmp_path_factory, sample_case: Path, pick: int, cut: float, flip: int, mode: str) -> None:
    work = tmp_path_factory.mktemp("fzs") / "case"
    shutil.copytree(sample_case, work, symlinks=True)
    shutil.copytree(sample_case.parent / "inputs", work.parent / "inputs", symlinks=True)
    candidates = sorted(p for p in work.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".gz", ".image"))
    target = candidates[pick % len(candidates)]
    data = target.read_bytes()
    if mode == "truncate":
        new = data[: int(len(data) * cut)]
    elif mode == "flip" and data:
        i = int((len(data) - 1) * cut)
        new = data[:i] + bytes([data[i] ^ (flip or 1)]) + data[i + 1:]
    else:
        new = b""
    target.write_bytes(new)
    ref = CaseRef(work, classify(work) or Layout.UNKNOWN)
    problems = check_case(ref)
    _assert_sane(work, problems)
    _assert_sane(work, summarize_case(ref, work.parent).problems)
    must_notice = (mode in ("truncate", "empty") and target.suffix in (".json", ".gz", ".image")) or (
        mode == "flip" and target.suffix == ".image"
    )
    if must_notice and target.suffix == ".json":
        # a cut that only drops the trailing newline (or other whitespace) leaves the same
        # JSON value: nothing is wrong with the file then
        try:
            must_notice = orjson.loads(new) != orjson.loads(data)
        except orjson.JSONDecodeError:
            must_notice = True
    if new != data and must_notice:
        # a cut JSON file no longer parses; gzip archives and media files are hash-bound
        assert problems, f"{mode} of {target.relative_to(work)} went unnoticed"
