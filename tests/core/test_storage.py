import os
from pathlib import Path

import pytest

from eviscene_tui.storage import EvidenceWriteRefused, WorkDir, append_line, default_workdir, replace_file, write_new_file


def test_write_new_never_overwrites(tmp_path: Path):
    p = tmp_path / "a" / "rec.json"
    write_new_file(p, b"one")
    with pytest.raises(FileExistsError):
        write_new_file(p, b"two")
    assert p.read_bytes() == b"one"
    assert [f.name for f in p.parent.iterdir()] == ["rec.json"]  # no tmp left behind


def test_replace_and_append(tmp_path: Path):
    p = tmp_path / "state.json"
    replace_file(p, b"1")
    replace_file(p, b"2")
    assert p.read_bytes() == b"2"
    j = tmp_path / "j.jsonl"
    append_line(j, b'{"a":1}')
    append_line(j, b'{"a":2}\n')
    assert j.read_bytes() == b'{"a":1}\n{"a":2}\n'


def test_workdir_refuses_evidence_root(tmp_path: Path):
    root = tmp_path / "runs"
    root.mkdir()
    assert default_workdir(root) == tmp_path / "runs.eviscene-tui"
    wd = WorkDir(default_workdir(root), evidence_roots=[root])
    wd.write_new(wd.sub("x.json"), b"{}")
    with pytest.raises(EvidenceWriteRefused):
        wd.write_new(root / "sneaky.json", b"{}")
    with pytest.raises(EvidenceWriteRefused):
        wd.append(root / "sub" / ".." / "j.jsonl", b"x")
    with pytest.raises(EvidenceWriteRefused):
        WorkDir(root / "inside", evidence_roots=[root])
    assert sorted(os.listdir(root)) == []
