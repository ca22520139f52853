import gzip
import hashlib
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from eviscene_tui.artifacts import jsonio
from eviscene_tui.artifacts.problems import ProblemCode

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_bytes_match_the_drivers_json_dumps(value):
    expected = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    assert jsonio.canonical_json_bytes(value) == expected


def _drivers(value):
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


mixed_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**66), 2**66) | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=5) | st.lists(st.floats(), max_size=6) | st.dictionaries(st.text(max_size=5), c, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(mixed_values)
def test_canonical_hash_is_the_drivers_with_or_without_the_float_hint(value):
    """The one canonical hash (integrity, judge, trace, samples all call it) gives the
    driver's bytes whichever path it takes: with ``floats_likely`` (the stdlib first), and
    on inf / nan, big ints and long float lists that orjson does not write as the stdlib does."""
    assert jsonio.canonical_json_bytes(value) == _drivers(value)
    assert jsonio.canonical_json_bytes(value, floats_likely=True) == _drivers(value)
    assert jsonio.canonical_sha256(value) == hashlib.sha256(_drivers(value)).hexdigest()


@pytest.mark.parametrize("odd", [list(range(100000)), [1, 2**63], {"a": [1.0, 2]}, {1: "int key"},
                                 [1e-05, 1e16, -0.0, 5e-324, float("inf")], {"b": {"a": [2**70, 0.1]}}, [[[]]] * 3],
                         ids=["long-ints", "int-2**63", "float-int", "int-key", "odd-floats", "big-int-nested", "nested-empty"])
def test_canonical_bytes_of_the_edges_are_the_drivers(odd):
    assert jsonio.canonical_json_bytes(odd) == _drivers(odd)


def test_floats_take_orjson_only_where_it_writes_the_drivers_bytes():
    """Floats of magnitude 0 or in [1e-4, 1e16) go through orjson (the 10,000-case check
    spent a quarter of its time in the stdlib encoder); the edges and dense samples around
    them give the stdlib's bytes exactly (1e-05, not 0.00001)."""
    import random

    edges = [0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e-05, 5e-324, 1e16, 9999999999999998.0, 1e22, 0.1, 1 / 3, 2.5e15, 1e300]
    rnd = random.Random(3)
    values = edges + [10 ** rnd.uniform(-7, 18) for _ in range(20000)]
    for v in values:
        for x in (v, -v, [v, 1, "a", None], {"k": v, "n": [v, v / 7]}):
            expected = json.dumps(x, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
            assert jsonio.canonical_json_bytes(x) == expected, x
    assert jsonio._orjson_safe([0.5, 1e-4, "x"]) and not jsonio._orjson_safe([0.5, 1e-05]) and not jsonio._orjson_safe(float("inf"))


parsed_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-05, -1e-05, 9.99e-05, 1e-4, 1e16, 1.5e-7, 5e-324, 1e300, 0.1])
    | st.text() | st.sampled_from(["1e-5", "3e+7", "0.00001", "hint-00", "re-check", "x0.0000y"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(parsed_values)
def test_canonical_bytes_of_a_parsed_value_match_the_drivers_json_dumps(value):
    # a run file read back (orjson.loads): orjson's bytes unless a float is written otherwise
    parsed = orjson.loads(json.dumps(value, ensure_ascii=False))
    expected = json.dumps(parsed, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    assert jsonio.canonical_json_bytes(parsed, parsed=True) == expected
    assert jsonio.canonical_sha256(parsed, parsed=True) == jsonio.canonical_sha256(parsed)


def test_hint_sha_strips():
    assert jsonio.hint_sha256("  look again \n") == jsonio.hint_sha256("look again")


def test_jsonl_splits_on_newline_only_and_reports_torn_lines(tmp_path: Path):
    row = {"text": "a\u2028b\u2029c\u0085d"}
    data = jsonio.canonical_jsonl_bytes([row, row]) + b'{"torn": tr\n' + jsonio.canonical_json_bytes(row) + b"\n" + b'{"tail'
    rows, problems, torn_tail = jsonio.parse_jsonl_bytes(data, "x.jsonl")
    assert rows == [row, row, row]
    assert [p.code for p in problems] == [ProblemCode.JSONL_TORN_LINE] * 2
    assert torn_tail
    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(gzip.compress(jsonio.canonical_jsonl_bytes([row])))
    assert jsonio.read_jsonl(p) == ([row], [])


def _write(dir_: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (dir_ / name).write_bytes(data)


@pytest.mark.parametrize("force_gzip", [False, True])
def test_bound_roundtrip_and_tamper(tmp_path: Path, force_gzip: bool):
    path = tmp_path / "hint-00.json"
    payload = {"teacher_steps": [{"stage_name": "psd_teacher_repair"}], "hint": "x"}
    files = jsonio.encode_bound(path, {"run": "r", "hint": "h"}, payload, force_gzip=force_gzip)
    _write(tmp_path, files)
    result = jsonio.read_bound(path)
    assert result.ok and result.payload == payload and result.form == ("gzip" if force_gzip else "plain")
    if force_gzip:
        archive = tmp_path / next(n for n in files if n.endswith(".gz"))
        doc = json.loads(gzip.decompress(archive.read_bytes()))
        doc["payload"]["hint"] = "tampered"
        archive.write_bytes(gzip.compress(json.dumps(doc).encode()))
    else:
        doc = json.loads(path.read_bytes())
        doc["payload"]["hint"] = "tampered"
        path.write_text(json.dumps(doc))
    codes = {p.code for p in jsonio.read_bound(path).problems}
    assert ProblemCode.BOUND_HASH_MISMATCH in codes


def test_gzip_pointer_cannot_escape_its_directory(tmp_path: Path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"schema_version": jsonio.BOUND_GZIP_SCHEMA, "identity": {}, "payload_sha256": "0", "archive": "../x.json.gz"}))
    assert [p.code for p in jsonio.read_bound(path).problems] == [ProblemCode.PATH_OUTSIDE_ROOT]


def test_large_payload_switches_to_gzip(tmp_path: Path):
    files = jsonio.encode_bound(tmp_path / "big.json", {}, ["x" * 1024] * 1100)
    assert len(files) == 2


def test_missing_and_truncated(tmp_path: Path):
    assert jsonio.read_json(tmp_path / "nope.json")[1][0].code == ProblemCode.MISSING_ARTIFACT
    (tmp_path / "t.json").write_text('{"status": "gener')
    value, problems = jsonio.read_json(tmp_path / "t.json")
    assert value is None and problems[0].code == ProblemCode.JSON_INVALID and "truncated" in problems[0].message


@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data):
    jsonio.parse_json_bytes(data, "f")
    jsonio.parse_jsonl_bytes(data, "f")


def test_corrupt_gzip_streams_become_problems(tmp_path: Path):
    good = gzip.compress(b'{"a":1}\n' * 100)
    bad = good[:20] + bytes(b ^ 0xFF for b in good[20:40]) + good[40:]
    (tmp_path / "x.jsonl.gz").write_bytes(bad)
    rows, problems = jsonio.read_jsonl(tmp_path / "x.jsonl.gz")
    assert problems and problems[0].code == ProblemCode.JSON_INVALID
    path = tmp_path / "c.json"
    files = jsonio.encode_bound(path, {}, {"x": 1}, force_gzip=True)
    _write(tmp_path, files)
    archive = tmp_path / next(n for n in files if n.endswith(".gz"))
    data = archive.read_bytes()
    archive.write_bytes(data[:15] + bytes(b ^ 0xFF for b in data[15:30]) + data[30:])
    assert jsonio.read_bound(path).problems
