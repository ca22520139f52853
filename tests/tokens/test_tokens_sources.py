"""Listing and loading captures of a case: steps, attempt id fields, recorded continuations."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from eviscene_tui.scaffold import tiny
from eviscene_tui.tokens.decode import LocalTokenizerDecoder
from eviscene_tui.tokens.sources import CaptureError, enumerate_captures, load_capture, locate_hint
from eviscene_tui.scaffold.synthetic_capture import HINT, HINT_TEXT, synthetic_case


@pytest.fixture
def case(tmp_path: Path):
    return synthetic_case(tmp_path / "run")


def test_enumerate(case, tmp_path: Path):
    wd = tmp_path / "wd"
    (wd / "streams").mkdir(parents=True)
    (wd / "streams" / "c1.json").write_bytes(orjson.dumps({"status": "complete", "case": {"case_root": str(case.root)}, "prompt_token_ids": [1, 2], "completion_token_ids": [3], "usage": {"completion_tokens": 2}}))
    (wd / "streams" / "other.json").write_bytes(b'{"no": "ids"}')
    refs = enumerate_captures(case, workdir=wd)
    keys = [r.key for r in refs]
    assert keys == [
        "step:1",
        "attempt:0:student_prompt_ids",
        "attempt:0:teacher_prompt_ids",
        "attempt:0:completion_ids",
        "attempt:0:repair_rollout_token_capture",
        "recorded:streams/c1.json",
    ]
    rec = load_capture(case, "recorded:streams/c1.json", workdir=wd)
    assert rec.ids == [1, 2, 3] and rec.completion_start == 2
    assert any(c.level == "fail" and "usage.completion_tokens = 2" in c.message for c in rec.checks)
    with pytest.raises(CaptureError, match="outside the work directory"):
        load_capture(case, "recorded:../../etc/passwd", workdir=wd)


def test_teacher_prompt_hint_span_from_its_text(case):
    data = load_capture(case, "attempt:0:teacher_prompt_ids")
    assert data.hinted_prompt and data.hint_text == HINT and data.hint_prompt_len == len(data.ids)
    span = locate_hint(case, data, LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="t"))
    a, b = span.range
    assert tiny.decode(data.ids[a:b]).strip() == HINT and span.basis == "hint text"
    # the prompt difference holds the hint plus its framing ("\nHint: ")
    lo, hi = data.prompt_diff.inserted
    assert tiny.decode(data.ids[lo:hi]) == HINT_TEXT and lo < a and b == hi
    assert span.same_beyond_hint is True and span.difference is None
    assert data.prompt_diff.pure_insertion
    assert all(c.level == "ok" for c in data.checks), data.checks
    rep = data.media_report
    assert rep is not None and rep.ok and rep.conditioning_equal is True
    assert rep.images[0].status == "ok" and rep.images[0].expected_run_length == 64


def test_completion_gets_logprobs_and_alignment(case):
    data = load_capture(case, "attempt:0:completion_ids")
    assert data.kind == "completion" and data.completion_start == 0
    assert data.logprobs is not None and len(data.logprobs) == len(data.ids)
    assert data.topk is not None and data.topk_at(0)[0].token_id == data.ids[0]
    assert data.alignment is not None and data.source_completion_ids is not None


def test_step_capture(case):
    data = load_capture(case, "step:1")
    assert data.completion_start == len(case.trace()[0].raw_steps[1]["metadata"]["policy_token_capture"]["prompt_token_ids"])
    assert data.logprob_semantics == "pre_grammar_unprocessed_v1"


def test_tampered_image_in_attempt(case, tmp_path: Path):
    media = tmp_path / "run" / "media"
    [img] = list(media.iterdir())
    img.write_bytes(img.read_bytes() + b"tampered")
    data = load_capture(case, "attempt:0:student_prompt_ids")
    assert data.media_report.images[0].status == "sha_mismatch"
    assert any("tampered" in p.message for p in data.media_report.problems)


@pytest.mark.parametrize(
    "key,msg",
    [
        ("step:0", "no metadata.policy_token_capture"),
        ("step:99", "there is no step 99"),
        ("attempt:3:completion_ids", "no attempts recorded for round 3"),
        ("attempt:0.4:completion_ids", "there is no attempt 4"),
        ("attempt:0:bogus", "unknown attempt field"),
        ("nonsense", "bad capture name"),
    ],
)
def test_bad_keys(case, key, msg):
    with pytest.raises(CaptureError, match=msg):
        load_capture(case, key)


def test_with_sample_generator(tmp_path: Path):
    """The deterministic sample runs open through the real CaseBundle."""
    from conftest import generate_samples

    from eviscene_tui.artifacts.case import CaseBundle

    generate_samples(tmp_path / "s")
    found = 0
    for case_dir in sorted((tmp_path / "s").iterdir()):
        if not case_dir.is_dir():
            continue
        case = CaseBundle(case_dir)
        for ref in enumerate_captures(case):
            data = load_capture(case, ref.key)
            assert len(data.ids) == ref.size
            found += 1
    assert found > 10


def test_each_case_lists_only_the_recorded_continuations_that_name_it(tmp_path: Path) -> None:
    """A record that names no case, or another case, is not a capture of this case; a
    record of this case still is once the tree (and the work dir) were moved."""
    from eviscene_tui.tokens.sources import recorded_captures

    a, b = synthetic_case(tmp_path / "tree" / "case-a"), synthetic_case(tmp_path / "tree" / "case-b")
    a.case_id = b.case_id = "case-flood-0001"  # one source case, two copies: the folder tells them apart
    wd = tmp_path / "wd" / "continuations"
    wd.mkdir(parents=True)
    ids = {"status": "complete", "prompt_token_ids": [1, 2], "completion_token_ids": [3]}
    docs = {
        "of-a.json": {"case": {"case_id": a.case_id, "case_key": "case-a", "case_root": str(a.root)}},
        "of-b.json": {"case": {"case_id": b.case_id, "case_key": "case-b", "case_root": str(b.root)}},
        "no-case.json": {"case": {"case_key": "supervised-round-01"}},
        "moved-a.json": {"case": {"case_id": a.case_id, "case_key": "case-a", "case_root": "/data/eviscene/gone/case-a"}},
        "moved-other.json": {"case": {"case_id": a.case_id, "case_key": "case-z", "case_root": "/data/eviscene/gone/case-z"}},
    }
    for name, doc in docs.items():
        (wd / name).write_bytes(orjson.dumps({**ids, **doc}))

    def listed(case) -> list[str]:
        return sorted(r.key.rsplit("/", 1)[-1] for r in enumerate_captures(case, workdir=wd.parent) if r.group == "recorded")

    assert listed(a) == ["moved-a.json", "of-a.json"]
    assert listed(b) == ["of-b.json"]
    assert len(recorded_captures(wd.parent)) == 5  # no case asked: every record


async def test_recorded_continuation_from_policy_recorder(tmp_path: Path, case):
    """A continuation recorded by the policy client opens as a capture."""
    fake = pytest.importorskip("eviscene_tui.scaffold.fake_vllm.testing")
    from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer
    from eviscene_tui.policy.client import PolicyClient
    from eviscene_tui.policy.config import PolicyConfig
    from eviscene_tui.policy.session import run_continuation
    from eviscene_tui.storage import WorkDir

    wd = tmp_path / "wd"
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        async with PolicyClient(fake.target_for(srv), PolicyConfig()) as client:
            await run_continuation(client, fake.simple_request(), work=WorkDir(wd), case_ref={"case_id": "c1", "case_root": str(case.root)})
            await run_continuation(client, fake.simple_request(), work=WorkDir(wd), case_ref={"case_id": "other", "case_root": "/elsewhere"})
    refs = [r for r in enumerate_captures(case, workdir=wd) if r.group == "recorded"]
    assert len(refs) == 1 and refs[0].key.startswith("recorded:continuations/")  # the other case's record is left out
    data = load_capture(case, refs[0].key, workdir=wd)
    assert data.kind == "continuation" and data.completion_start is not None and len(data.ids) == refs[0].size
    assert any(c.level == "ok" and "= usage.completion_tokens" in c.message for c in data.checks), data.checks


def test_legacy_attempt_without_psd_media_is_information(case, tmp_path: Path):
    """Older runtimes wrote no psd_media: image-pad runs without it are a note, not a mismatch."""
    import dataclasses

    rnd = case.rounds[0]
    assert all(att.psd_media is not None for att in rnd.attempts)
    legacy = dataclasses.replace(case, rounds=[dataclasses.replace(rnd, attempts=[a.model_copy(update={"psd_media": None}) for a in rnd.attempts])])
    data = load_capture(legacy, "attempt:0:student_prompt_ids")
    assert data.media is None and data.media_report is None and data.media_problems == []
    assert data.media_note is not None and data.media_note.startswith("media binding not recorded (older runtime)")
    assert any(c.level == "info" and "older runtime" in c.message for c in data.checks)
    assert not any(c.level == "fail" and "media" in c.message for c in data.checks)
    # with psd_media present there is no such note
    assert load_capture(case, "attempt:0:student_prompt_ids").media_note is None
