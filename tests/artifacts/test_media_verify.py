"""psd_media v1-v3 normalisation and verification against media/ files."""

from __future__ import annotations

import hashlib
import io
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from eviscene_tui.artifacts.media import (
    MediaReport,
    estimate_pad_count,
    family_from_ids,
    image_pad_runs,
    pad_id_for,
    parse_psd_media,
    verify_media,
)
from eviscene_tui.artifacts.problems import ProblemCode

Q35 = {"vs": 248053, "ve": 248054, "pad": 248056}
Q25 = {"vs": 151652, "ve": 151653, "pad": 151655}


def _png(w: int, h: int, color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), color).save(buf, format="PNG")
    return buf.getvalue()


def _store(run_dir: Path, data: bytes) -> str:
    sha = hashlib.sha256(data).hexdigest()
    (run_dir / "media").mkdir(parents=True, exist_ok=True)
    (run_dir / "media" / f"{sha}.image").write_bytes(data)
    return sha


def _prompt(fam: dict, runs: list[int], hint: list[int] | None = None) -> list[int]:
    ids = [248045, 10, 11]
    for n in runs:
        ids += [fam["vs"]] + [fam["pad"]] * n + [fam["ve"]]
    ids += hint or []
    ids += [12, 13, 248046]
    return ids


def test_image_pad_runs_maximal():
    ids = [1, 5, 5, 5, 2, 5, 3, 5, 5]
    assert image_pad_runs(ids, 5) == [(1, 3), (5, 1), (7, 2)]
    assert image_pad_runs([], 5) == []
    assert image_pad_runs([5] * 4, 5) == [(0, 4)]


def test_pad_id_for_family_and_ids():
    assert pad_id_for("qwen3_5") == 248056
    assert pad_id_for("qwen3_5_moe") == 248056
    assert pad_id_for("qwen2_5_vl") == 151655
    assert pad_id_for("qwen3_vl") == 151655
    assert pad_id_for("llama") is None
    assert pad_id_for(_prompt(Q25, [4])) == 151655
    assert pad_id_for(_prompt(Q35, [4])) == 248056
    assert family_from_ids([1, 2, 3]) is None
    assert pad_id_for([1, 2, 3]) is None


def test_parse_v1_v2_v3():
    v1, p = parse_psd_media(
        {"schema_version": "ifv-psd-media-v1", "path": "media/abc.image", "sha256": "abc", "image_grid_thw": [[1, 8, 8]]}
    )
    assert not p and v1 is not None
    assert v1.images[0].sha256 == "abc" and v1.images[0].grid_thw == (1, 8, 8)
    assert v1.expected_run_length(0) == 16
    v2, p = parse_psd_media(
        {
            "schema_version": "ifv-psd-media-v2",
            "path": ["/x/a.image", "/x/b.image"],
            "sha256": ["a", "b"],
            "image_grid_thw": [[1, 4, 4], [1, 2, 6]],
            "pixel_values_sha256": "pv",
            "extra_key": 1,
        }
    )
    assert not p and v2 is not None and len(v2.images) == 2 and v2.pixel_values_sha256 == "pv"
    assert v2.model_extra and v2.model_extra["extra_key"] == 1
    v3, p = parse_psd_media(
        {
            "schema_version": "ifv-psd-media-v3",
            "processor_id": "/models/qwen",
            "processor_config": {"patch_size": 16},
            "image_sha256": ["s1"],
            "image_paths": ["/abs/driver/media/s1.image"],
            "merge_size": 2,
        }
    )
    assert not p and v3 is not None
    assert v3.processor_id == "/models/qwen" and v3.merge_size == 2 and v3.images[0].path.startswith("/abs")


def test_parse_unknown_and_bad():
    m, p = parse_psd_media({"schema_version": "ifv-psd-media-v9"})
    assert m is None and p[0].code == ProblemCode.SCHEMA_UNKNOWN and "v9" in p[0].message
    m, p = parse_psd_media([1, 2])
    assert m is None and p[0].code == ProblemCode.SCHEMA_UNKNOWN
    assert parse_psd_media(None) == (None, [])
    m, p = parse_psd_media(
        {"schema_version": "ifv-psd-media-v3", "image_sha256": ["a", "b"], "image_paths": ["/x/a"], "merge_size": 0}
    )
    assert m is not None
    codes = {x.code for x in p}
    assert codes == {ProblemCode.MEDIA_MISMATCH}
    assert any("2 image_sha256 but 1 image_paths" in x.message for x in p)


def test_verify_v3_ok_with_absolute_driver_paths(tmp_path: Path):
    data = _png(64, 32)
    sha = _store(tmp_path, data)
    media, _ = parse_psd_media(
        {
            "schema_version": "ifv-psd-media-v3",
            "processor_id": "/models/qwen3.5-9b",
            "processor_config": {"patch_size": 16},
            "image_sha256": [sha],
            "image_paths": [f"/home/driver/runs/x/media/{sha}.image"],
            "merge_size": 2,
        }
    )
    student = _prompt(Q35, [2])
    teacher = _prompt(Q35, [2], hint=[300, 301, 302])
    rep = verify_media(media, tmp_path, student_prompt_ids=student, teacher_prompt_ids=teacher)
    assert isinstance(rep, MediaReport)
    assert rep.ok, rep.problems
    img = rep.images[0]
    assert img.status == "ok" and img.resolved_path == str(tmp_path / "media" / f"{sha}.image")
    assert (img.width, img.height, img.format) == (64, 32, "PNG")
    assert rep.pad_id == 248056 and rep.conditioning_equal is True
    assert rep.student_runs == [(4, 2)] and rep.teacher_runs == [(4, 2)]
    assert img.estimated_run_length == estimate_pad_count(64, 32, {"patch_size": 16}, 2)


def test_verify_without_pillow_reports_no_size(tmp_path: Path, monkeypatch):
    """Without Pillow the image is still verified by hash; only its size is unknown."""
    sha = _store(tmp_path, _png(64, 32))
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` raises ImportError
    media, _ = parse_psd_media({"schema_version": "ifv-psd-media-v3", "image_sha256": [sha], "merge_size": 2})
    rep = verify_media(media, tmp_path)
    img = rep.images[0]
    assert img.status == "ok" and img.actual_sha256 == sha
    assert (img.width, img.height, img.format, img.estimated_run_length) == (None, None, None, None)


def test_verify_tampered_image(tmp_path: Path):
    data = _png(32, 32)
    sha = _store(tmp_path, data)
    # tamper: same name, other bytes
    (tmp_path / "media" / f"{sha}.image").write_bytes(_png(32, 32, color=(0, 0, 0)))
    media, _ = parse_psd_media(
        {"schema_version": "ifv-psd-media-v3", "image_sha256": [sha], "image_paths": [f"/abs/{sha}.image"], "merge_size": 2}
    )
    rep = verify_media(media, tmp_path, student_prompt_ids=_prompt(Q35, [3]), teacher_prompt_ids=_prompt(Q35, [3]))
    assert not rep.ok
    assert rep.images[0].status == "sha_mismatch"
    [prob] = rep.problems
    assert prob.code == ProblemCode.MEDIA_MISMATCH
    assert "tampered" in prob.message and sha[:12] in prob.message
    assert prob.path.endswith(f"{sha}.image")


def test_verify_missing_image(tmp_path: Path):
    media, _ = parse_psd_media(
        {"schema_version": "ifv-psd-media-v3", "image_sha256": ["f" * 64], "image_paths": ["/abs/x.image"], "merge_size": 2}
    )
    rep = verify_media(media, tmp_path)
    assert rep.images[0].status == "missing"
    assert rep.problems[0].code == ProblemCode.MISSING_ARTIFACT
    assert "not found" in rep.problems[0].message and "ffffffffffff" in rep.problems[0].message
    assert rep.student_runs is None and rep.conditioning_equal is None


def test_verify_relative_path_cannot_escape(tmp_path: Path):
    outside = tmp_path / "outside.image"
    outside.write_bytes(b"x")
    run = tmp_path / "run"
    run.mkdir()
    sha = hashlib.sha256(b"x").hexdigest()
    media, _ = parse_psd_media({"schema_version": "ifv-psd-media-v1", "path": "../outside.image", "sha256": sha})
    rep = verify_media(media, run)
    assert rep.images[0].status == "missing"


def test_verify_v1_relative_path_and_grid_mismatch(tmp_path: Path):
    data = b"not really an image"
    sha = hashlib.sha256(data).hexdigest()
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.bin").write_bytes(data)
    media, _ = parse_psd_media(
        {"schema_version": "ifv-psd-media-v1", "path": "imgs/a.bin", "sha256": sha, "image_grid_thw": [1, 4, 4]}
    )
    rep = verify_media(media, tmp_path, student_prompt_ids=_prompt(Q35, [5]))
    assert rep.images[0].status == "ok" and rep.images[0].width is None
    assert len(rep.problems) == 1
    msg = rep.problems[0].message
    assert "student prompt image #1 has 5 pad ids" in msg and "gives 4" in msg


@pytest.mark.parametrize("fam,pad", [(Q35, 248056), (Q25, 151655)])
def test_verify_run_count_and_conditioning(tmp_path: Path, fam, pad):
    a = _store(tmp_path, b"aaa")
    b = _store(tmp_path, b"bbb")
    media, _ = parse_psd_media(
        {"schema_version": "ifv-psd-media-v3", "image_sha256": [a, b], "image_paths": ["/x/1", "/x/2"], "merge_size": 2}
    )
    rep = verify_media(media, tmp_path, student_prompt_ids=_prompt(fam, [4, 6]), teacher_prompt_ids=_prompt(fam, [4, 5]))
    assert rep.pad_id == pad
    assert rep.conditioning_equal is False
    msgs = [p.message for p in rep.problems]
    assert any("visual conditioning differs" in m and "[4, 6]" in m and "[4, 5]" in m for m in msgs)
    rep = verify_media(media, tmp_path, student_prompt_ids=_prompt(fam, [4]), teacher_prompt_ids=_prompt(fam, [4]))
    assert rep.conditioning_equal is True
    assert sum("has 1 image-pad run(s)" in p.message for p in rep.problems) == 2


def test_estimate_pad_count():
    # 32x32 patches of 16 with merge 2: a 64x64 image -> 2x2 merged patches
    assert estimate_pad_count(64, 64, {"patch_size": 16, "min_pixels": 1}, 2) == 4
    assert estimate_pad_count(64, 64, {}, 2) is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300000) | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(["../../etc/passwd", "a\x00b", "/abs/x.image", "..", "f" * 64]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_media_like = st.fixed_dictionaries(
    {"schema_version": st.sampled_from(["ifv-psd-media-v1", "ifv-psd-media-v2", "ifv-psd-media-v3", "x"])},
    optional={
        "path": _json, "sha256": _json, "image_grid_thw": _json, "pixel_values_sha256": _json,
        "processor_id": _json, "processor_config": _json, "image_sha256": _json, "image_paths": _json,
        "merge_size": _json, "images": _json, "model_config": _json,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=_media_like, ids=st.lists(st.sampled_from([1, 248053, 248054, 248056, 151655]), max_size=40))
def test_media_never_raises(tmp_path: Path, obj, ids):
    media, problems = parse_psd_media(obj)
    assert all(p.code in set(ProblemCode) for p in problems)
    if media is not None:
        rep = verify_media(media, tmp_path, student_prompt_ids=ids, teacher_prompt_ids=ids[::-1])
        for img in rep.images:
            if img.resolved_path:
                assert Path(img.resolved_path).resolve().is_relative_to(tmp_path.resolve())
