"""Drafts of typed text (the stream screen's hint) and the session rule that what the
operator typed wins over a prefill or a saved draft."""

from __future__ import annotations

import errno
import os

import pytest

from eviscene_tui.state.drafts import DRAFT_LIMIT, draft_path, read_draft, save_draft
from eviscene_tui.state.stream_session import StreamSession
from eviscene_tui.storage import EvidenceWriteRefused, WorkDir


def test_a_draft_round_trips_and_is_replaced(tmp_path):
    work = WorkDir(tmp_path / "wd")
    path = draft_path(work.path, "stream-hint", "/data/case", "2")
    assert read_draft(path) == (None, None)
    save_draft(work, path, "first line\nsecond \u2028 line")
    save_draft(work, path, "first line\nsecond \u2028 line, edited")
    draft, error = read_draft(path)
    assert error is None and draft is not None and draft.text == "first line\nsecond \u2028 line, edited"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    assert draft_path(work.path, "stream-hint", "/data/case", "3") != path


def test_a_draft_is_never_written_into_the_evidence_root(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    work = WorkDir(tmp_path / "wd", evidence_roots=[root])
    with pytest.raises(EvidenceWriteRefused):
        save_draft(work, root / "drafts" / "x.json", "text")
    assert not (root / "drafts").exists()


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"schema": "other", "text": "x"}', b"\xff\xfe"])
def test_garbage_is_no_draft_and_says_why(tmp_path, content):
    path = tmp_path / "d.json"
    path.write_bytes(content)
    draft, error = read_draft(path)
    assert draft is None and error is not None and str(path) in error


def test_a_fifo_or_a_huge_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    draft, error = read_draft(fifo)  # returns at once: never opened for a blocking read
    assert draft is None and error is not None and "FIFO" in error
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(DRAFT_LIMIT + 1)
    draft, error = read_draft(huge)
    assert draft is None and error is not None


def test_a_full_disk_raises_and_leaves_no_temp_file(tmp_path, monkeypatch):
    work = WorkDir(tmp_path / "wd")
    path = draft_path(work.path, "stream-hint", "case", "0")
    real_write = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        save_draft(work, path, "text")
    monkeypatch.setattr(os, "write", real_write)
    assert not path.exists()
    assert list(path.parent.iterdir()) == []  # the temp file the failed write began is gone


def test_what_was_typed_wins_over_a_late_prefill_and_a_late_draft():
    s = StreamSession(hint=None)
    s.set_hint("typed before anything arrived")
    s.request_ready(None, "no request", run_hint="the run's hint")
    assert s.hint == "typed before anything arrived" and s.snapshot().hint_edited
    assert not s.restore_draft("an older draft")
    assert s.hint == "typed before anything arrived"


def test_a_draft_replaces_the_prefill_in_either_order_and_is_marked_edited():
    first = StreamSession(hint=None)
    first.request_ready(None, "no request", run_hint="the run's hint")
    assert first.hint == "the run's hint" and not first.snapshot().hint_edited
    assert first.restore_draft("the draft")
    assert first.hint == "the draft" and first.snapshot().hint_edited
    second = StreamSession(hint=None)
    assert second.restore_draft("the draft")
    second.request_ready(None, "no request", run_hint="the run's hint")
    assert second.hint == "the draft" and second.snapshot().hint_edited
    # a draft equal to the run's hint is not an edit
    third = StreamSession(hint="the run's hint")
    assert not third.restore_draft("the run's hint") and not third.snapshot().hint_edited
