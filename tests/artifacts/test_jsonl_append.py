"""read_jsonl_appended gives exactly what parsing the whole file gives (rows, problems
with their order and messages, the torn-tail flag), read after read, while the file is
appended to (torn lines included), rewritten in place, truncated or replaced; and it
parses only the appended bytes when the earlier ones are unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eviscene_tui.artifacts import jsonl_append
from eviscene_tui.artifacts.jsonio import parse_jsonl_bytes


@pytest.fixture(autouse=True)
def _memo_every_file(monkeypatch: pytest.MonkeyPatch) -> None:
    # remember every file however small, and split into tiny chunks, so the paths under
    # test are the ones a tens-of-MB events.jsonl takes
    monkeypatch.setattr(jsonl_append, "MEMO_MIN", 0)
    monkeypatch.setattr(jsonl_append, "CHUNK", 7)
    jsonl_append.forget()


def _whole(path: Path) -> tuple[list[object], list[str], bool]:
    rows, problems, torn = parse_jsonl_bytes(path.read_bytes(), str(path))
    return rows, [f"{p.code}:{p.path}:{p.message}" for p in problems], torn


def _appended(path: Path) -> tuple[list[object], list[str], bool]:
    rows, problems, torn = jsonl_append.read_jsonl_appended(str(path))
    return rows, [f"{p.code}:{p.path}:{p.message}" for p in problems], torn


_row = st.dictionaries(st.sampled_from(["event", "n", "text"]), st.integers(-(2**40), 2**40) | st.text(max_size=8), max_size=3)
_good = _row.map(lambda r: orjson.dumps(r) + b"\n")
_bad = st.sampled_from([b"{torn\n", b"\n", b"  \r\n", b'{"a": 1}x\n', b"[1,\n", b"\xff\n"])
_piece = _good | _bad | st.binary(max_size=12)  # st.binary: a torn fragment, often without newline

# one operation on the file between two reads
_append = st.tuples(st.just("append"), st.lists(_piece, max_size=5))
_rewrite = st.tuples(st.just("rewrite"), st.integers(min_value=0), st.binary(min_size=1, max_size=4))
_truncate = st.tuples(st.just("truncate"), st.integers(min_value=0))
_replace = st.tuples(st.just("replace"), st.lists(_piece, max_size=4))
_op = _append | _append | _rewrite | _truncate | _replace


def _apply(path: Path, op: tuple) -> None:
    kind = op[0]
    if kind == "append":
        with open(path, "ab") as fh:
            fh.write(b"".join(op[1]))
    elif kind == "rewrite":  # in place, same size where possible (mtime/size may not change)
        size = path.stat().st_size
        if size:
            with open(path, "r+b") as fh:
                fh.seek(op[1] % size)
                fh.write(op[2][: size - op[1] % size])
    elif kind == "truncate":
        size = path.stat().st_size
        os.truncate(path, op[1] % (size + 1))
    else:  # a new file under the same name (new inode)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(b"".join(op[1]))
        os.replace(tmp, path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.lists(_piece, max_size=6), ops=st.lists(_op, max_size=8))
def test_every_read_equals_the_whole_file_read(tmp_path: Path, start: list[bytes], ops: list[tuple]) -> None:
    jsonl_append.forget()
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(start))
    assert _appended(path) == _whole(path)
    for op in ops:
        _apply(path, op)
        assert _appended(path) == _whole(path)
        assert _appended(path) == _whole(path)  # a second read with nothing new


def test_only_the_appended_lines_are_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n{"n": 3')  # the last line torn: a writer mid-line
    rows, problems, torn = jsonl_append.read_jsonl_appended(str(path))
    assert rows == [{"n": 1}, {"n": 2}] and torn and len(problems) == 1
    parsed: list[bytes] = []
    real = orjson.loads
    monkeypatch.setattr(jsonl_append.orjson, "loads", lambda b: parsed.append(bytes(b)) or real(b))
    with open(path, "ab") as fh:
        fh.write(b'}\n{"n": 4}\n')
    rows, problems, torn = jsonl_append.read_jsonl_appended(str(path))
    assert rows == [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}] and problems == [] and not torn
    assert parsed == [b'{"n": 3}', b'{"n": 4}']  # the torn line once complete, and the new one


def test_a_rewrite_of_an_earlier_line_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n')
    assert jsonl_append.read_jsonl_appended(str(path))[0] == [{"n": 1}, {"n": 2}]
    st_before = path.stat()
    with open(path, "r+b") as fh:  # same size, same inode
        fh.write(b'{"n": 7}')
    os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
    assert jsonl_append.read_jsonl_appended(str(path))[0] == [{"n": 7}, {"n": 2}]


def test_a_missing_file_raises_like_open(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        jsonl_append.read_jsonl_appended(str(tmp_path / "absent.jsonl"))
