"""Hypothesis: random bytes and mutated JSON into load_case; nothing escapes, problems come back."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_case_builders import build_search, build_single

from eviscene_tui.artifacts.case import load_case

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False),
                      st.text(max_size=20))
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("fuzz-templates")
    out = {"search": build_search(base / "search"), "single": build_single(base / "single"),
           "gzsearch": build_search(base / "gz", gzip_continuation=True)}
    samples = Path(__file__).resolve().parents[2] / "sample_runs"
    for name in ("feedback-converged-3-rounds", "single-generating"):
        if (samples / name).is_dir():
            out["sample-" + name] = samples / name
    return out


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _mutate_json(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    if isinstance(value, dict) and value and depth < 6 and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        value = dict(value)
        value[key] = _mutate_json(value[key], data, depth + 1)
        return value
    if isinstance(value, list) and value and depth < 6 and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        value = list(value)
        value[i] = _mutate_json(value[i], data, depth + 1)
        return value
    return data.draw(JSON_VALUE)


def _exercise(root: Path) -> None:
    case = load_case(root)
    _ = case.layout, case.status, case.manifest, case.search_state, case.attempts, case.candidates
    for r in case.rounds:
        r.load_all()
        _ = r.relocalized, r.continuations, r.judge, r.episode(0)
        for a in r.attempts or []:
            _ = a.state, a.checker
    case.failure_site()
    case.all_problems()
    trace, _ = case.trace()
    if trace is not None and trace.step_count:
        trace.brief(0)
        trace.step_detail(trace.step_count - 1)
        trace.policy_step_indices()
    case.source_step_request(1)
    _ = case.private_context  # must not raise


#: the files the root loader always reads
ROOT_FILES = ("manifest.json", "repair_attempts.jsonl", "search-state.json")


def _not_json(data: bytes, *, lines: bool = False) -> bool:
    """``data`` does not parse as JSON (as JSON lines: some non-blank line does not)."""
    try:
        for piece in data.split(b"\n") if lines else [data]:
            if piece.strip() or not lines:
                orjson.loads(piece)
    except orjson.JSONDecodeError:
        return True
    return False


def _copy(template: Path) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="a1fuzz-")) / "case"
    shutil.copytree(template, dest, symlinks=True)
    return dest


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_bytes_into_case(templates: dict[str, Path], data: st.DataObject) -> None:
    which = data.draw(st.sampled_from(sorted(templates)))
    root = _copy(templates[which])
    try:
        target = data.draw(st.sampled_from(_files(root)))
        original = target.read_bytes()
        mode = data.draw(st.sampled_from(["random", "truncate", "flip"]))
        if mode == "random":
            new = b"\xff" + data.draw(st.binary(max_size=200))  # never JSON (0xff starts no UTF-8 text)
        elif mode == "truncate":
            new = original[: data.draw(st.integers(0, max(0, len(original) - 1)))]
        else:
            i = data.draw(st.integers(0, max(0, len(original) - 1)))
            new = original[:i] + bytes([(original[i] ^ 0x5A) if original else 0]) + original[i + 1 :]
        target.write_bytes(new)
        _exercise(root)
        case = load_case(root)
        if target.name in ROOT_FILES and target.parent == root and _not_json(new, lines=target.suffix == ".jsonl"):
            # these are always read by the root loader: a change that breaks JSON is a problem of that file
            assert any(str(p.path).endswith(target.name) for p in case.problems), f"no problem for broken {target.name}"
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(ROOT_FILES), junk=st.binary(max_size=200))
def test_random_bytes_in_a_root_file_are_a_problem_of_that_file(templates: dict[str, Path], name: str, junk: bytes) -> None:
    """Every draw asserts: bytes that are never JSON in a file the root loader always reads
    come back as a problem naming that file (and nothing escapes)."""
    root = _copy(templates["search"])
    try:
        target = root / name
        assert target.is_file()
        target.write_bytes(b"\xff" + junk)
        case = load_case(root)
        assert any(str(p.path).endswith(name) for p in case.problems), [p.path for p in case.problems]
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_json_into_case(templates: dict[str, Path], data: st.DataObject) -> None:
    which = data.draw(st.sampled_from(sorted(templates)))
    root = _copy(templates[which])
    try:
        candidates = [p for p in _files(root) if p.suffix in (".json", ".jsonl")]
        target = data.draw(st.sampled_from(candidates))
        if target.suffix == ".jsonl":
            rows = []
            for line in target.read_bytes().split(b"\n"):
                try:
                    rows.append(orjson.loads(line)) if line.strip() else None
                except orjson.JSONDecodeError:
                    continue  # a torn line that is there on purpose (e.g. a runtime events.jsonl tail)
            rows = _mutate_json(rows, data) if rows else data.draw(JSON_VALUE)
            rows = rows if isinstance(rows, list) else [rows]
            target.write_bytes(b"".join(_dump(r) + b"\n" for r in rows))
        else:
            value = _mutate_json(orjson.loads(target.read_bytes()), data)
            target.write_bytes(_dump(value))
        _exercise(root)
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_structural_damage_into_case(templates: dict[str, Path], data: st.DataObject) -> None:
    """Deleted files, files replaced by directories and back, symlink loops and escapes."""
    root = _copy(templates[data.draw(st.sampled_from(["search", "single"]))])
    try:
        for _ in range(data.draw(st.integers(1, 4))):
            entries = sorted(p for p in root.rglob("*") if not p.is_symlink())
            target = data.draw(st.sampled_from(entries))
            op = data.draw(st.sampled_from(["delete", "to_dir", "to_file", "loop", "escape"]))
            if op == "delete" and target.is_file():
                target.unlink()
            elif op == "to_dir" and target.is_file():
                target.unlink()
                target.mkdir()
            elif op == "to_file" and target.is_dir():
                shutil.rmtree(target)
                target.write_bytes(b"{}")
            elif op == "loop" and target.exists():
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink()
                target.symlink_to(target)
            elif op == "escape" and target.exists():
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink()
                target.symlink_to("/etc" if data.draw(st.booleans()) else "/etc/hostname")
        _exercise(root)
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
