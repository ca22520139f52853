"""scan_jsonl_appended concludes exactly what parsing the whole file gives (problems with
their order and messages, the torn-tail flag, the row count, the first picked row and its
line), check after check, while the file is appended to (torn lines included), rewritten
in place, truncated or replaced; it parses only the appended bytes when the earlier ones
are unchanged, and keeps no rows between checks."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eviscene_tui.artifacts import jsonl_append
from eviscene_tui.artifacts.jsonio import jsonl_lines, parse_jsonl_bytes


@pytest.fixture(autouse=True)
def _memo_every_file(monkeypatch: pytest.MonkeyPatch) -> None:
    # remember every file however small, and split into tiny chunks, so the paths under
    # test are the ones a tens-of-MB events.jsonl takes
    monkeypatch.setattr(jsonl_append, "MEMO_MIN", 0)
    monkeypatch.setattr(jsonl_append, "CHUNK", 7)
    monkeypatch.setattr(jsonl_append, "PREFIX_PIECE", 5)
    jsonl_append.forget()


def _picks(row: object) -> bool:
    """A row with an odd "n" (any row can be picked, so the first one matters)."""
    return isinstance(row, dict) and isinstance(row.get("n"), int) and row["n"] % 2 == 1


def _whole(path: Path) -> tuple[int, tuple[int, object] | None, list[str], bool]:
    data = path.read_bytes()
    rows, problems, torn = parse_jsonl_bytes(data, str(path))
    picked = next(((number, row) for number, row, error, _tail in jsonl_lines(data) if error is None and _picks(row)), None)
    return len(rows), picked, [f"{p.code}:{p.path}:{p.message}" for p in problems], torn


def _appended(path: Path) -> tuple[int, tuple[int, object] | None, list[str], bool]:
    scan = jsonl_append.scan_jsonl_appended(str(path), _picks)
    picked = (scan.picked.line, scan.picked.row) if scan.picked is not None else None
    return scan.rows, picked, [f"{p.code}:{p.path}:{p.message}" for p in scan.problems], scan.torn_tail


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
    path.write_bytes(b'{"n": 2}\n{"n": 4}\n{"n": 3')  # the last line torn: a writer mid-line
    scan = jsonl_append.scan_jsonl_appended(str(path), _picks)
    assert scan.rows == 2 and scan.torn_tail and len(scan.problems) == 1 and scan.picked is None
    parsed: list[bytes] = []
    real = orjson.loads
    monkeypatch.setattr(jsonl_append.orjson, "loads", lambda b: parsed.append(bytes(b)) or real(b))
    with open(path, "ab") as fh:
        fh.write(b'}\n{"n": 5}\n')
    scan = jsonl_append.scan_jsonl_appended(str(path), _picks)
    assert scan.rows == 4 and scan.problems == [] and not scan.torn_tail
    assert scan.picked == jsonl_append.PickedRow(3, {"n": 3})
    assert parsed == [b'{"n": 3}', b'{"n": 5}']  # the torn line once complete, and the new one


def test_no_row_is_kept_between_checks(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"n": 2 * i, "text": "x" * 50}) + b"\n" for i in range(200)))
    jsonl_append.scan_jsonl_appended(str(path), _picks)
    seen = jsonl_append._memo[str(path)]
    assert seen.rows == 200 and seen.picked is None
    # what is remembered is a few counts, a digest and the (empty) problem list, not rows
    assert not any(isinstance(getattr(seen, f), list) and getattr(seen, f) for f in seen.__slots__)


def test_another_pick_reads_the_whole_file_again(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n": 2}\n{"n": 3}\n')
    assert jsonl_append.scan_jsonl_appended(str(path), _picks).picked == jsonl_append.PickedRow(2, {"n": 3})
    first = jsonl_append.scan_jsonl_appended(str(path), lambda row: True).picked
    assert first == jsonl_append.PickedRow(1, {"n": 2})


def test_a_rewrite_of_an_earlier_line_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n": 2}\n{"n": 4}\n')
    assert jsonl_append.scan_jsonl_appended(str(path), _picks).picked is None
    st_before = path.stat()
    with open(path, "r+b") as fh:  # same size, same inode
        fh.write(b'{"n": 7}')
    os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
    assert jsonl_append.scan_jsonl_appended(str(path), _picks).picked == jsonl_append.PickedRow(1, {"n": 7})


def test_a_missing_file_raises_like_open(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        jsonl_append.scan_jsonl_appended(str(tmp_path / "absent.jsonl"), _picks)
