"""Every problem code triggered by a hand-built fixture (and clean variants stay clean)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

import test_integrity_fixtures as fx

from eviscene_tui.artifacts.integrity import check_case, pad_id_for_ids, pad_runs
from eviscene_tui.artifacts.jsonio import canonical_jsonl_bytes, hint_sha256
from eviscene_tui.artifacts.layout import CaseRef, Layout
from eviscene_tui.artifacts.problems import ProblemCode


def search(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "s"
    fx.build_search(root)
    return root, root / "rounds" / "round-00"


def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "r"
    fx.build_run(run, "/remote/runs/r")
    return run


def check_search(root: Path):
    return check_case(CaseRef(root, Layout.FEEDBACK_SEARCH))


def check_run(run: Path):
    return check_case(CaseRef(run, Layout.SINGLE_RUN))


def only(problems, code: str):
    found = [p for p in problems if p.code == code]
    assert found, f"no {code} in {[(p.code, p.path, p.message) for p in problems]}"
    return found


def rewrite_jsonl(path: Path, edit) -> None:
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    edit(rows)
    path.write_bytes(canonical_jsonl_bytes(rows))


# ----------------------------------------------------------------------------- not_regular_file, file_too_large
def test_fifo_in_place_of_a_manifest_is_not_regular_file(tmp_path: Path) -> None:
    root, rdir = search(tmp_path)
    (rdir / "manifest.json").unlink()
    os.mkfifo(rdir / "manifest.json")
    problems = check_search(root)
    hit = only(problems, "not_regular_file")
    assert hit[0].path.endswith("round-00/manifest.json") and "FIFO" in hit[0].message
    # one fault, one problem: the snapshot hash and the required manifest say nothing more
    assert [p for p in problems if p.path.endswith("round-00/manifest.json")] == hit


def test_sparse_run_inputs_too_large_is_refused(tmp_path: Path) -> None:
    root, rdir = search(tmp_path)
    with open(rdir / "run-inputs.json", "r+b") as fh:
        fh.truncate(2 << 30)
    hit = only(check_search(root), "file_too_large")
    assert hit[0].path.endswith("round-00/run-inputs.json") and "2.0 GiB" in hit[0].message


# ----------------------------------------------------------------------------- json_invalid
def test_truncated_round_manifest_is_json_invalid(tmp_path: Path) -> None:
    root, rdir = search(tmp_path)
    data = (rdir / "manifest.json").read_bytes()
    (rdir / "manifest.json").write_bytes(data[: len(data) // 2])
    problems = check_search(root)
    hit = only(problems, "json_invalid")
    assert any(p.path.endswith("rounds/round-00/manifest.json") and "truncated" in p.message for p in hit)
    # the manifest is also in the search-state snapshot -> its hash no longer matches
    assert any(p.code == "file_hash_mismatch" and p.path.endswith("round-00/manifest.json") for p in problems)


def test_manifest_that_is_not_an_object_is_json_invalid(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (run / "manifest.json").write_bytes(b"[1, 2]\n")
    hit = only(check_run(run), "json_invalid")
    assert any("expected a JSON object" in p.message for p in hit)


# ----------------------------------------------------------------------------- jsonl_torn_line
def test_torn_attempt_line_reported_other_rows_still_checked(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    path = run / "repair_attempts.jsonl"
    path.write_bytes(b'{"schema_version": "ifv-psd-repair-attempt-v1", "acc\n' + path.read_bytes())
    problems = check_run(run)
    hit = only(problems, "jsonl_torn_line")
    assert hit[0].path.endswith("repair_attempts.jsonl") and "line 1" in hit[0].message
    assert [p.code for p in problems] == ["jsonl_torn_line"]


def test_torn_last_event_line_is_normal_but_torn_middle_line_is_not(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    assert check_run(run) == []  # the fixture's events.jsonl already ends with a torn line
    events = next(run.glob("runtime/*/*/events.jsonl"))
    events.write_bytes(b"{torn\n" + events.read_bytes())
    hit = only(check_run(run), "jsonl_torn_line")
    assert len(hit) == 1 and "line 1" in hit[0].message


# ----------------------------------------------------------------------------- bound_hash_mismatch
def test_edited_bound_payload_is_bound_hash_mismatch(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    doc = orjson.loads((run / "hint-proposals.json").read_bytes())
    doc["payload"][0]["text"] = "a different hint"
    (run / "hint-proposals.json").write_bytes(orjson.dumps(doc))
    hit = only(check_run(run), "bound_hash_mismatch")
    assert hit[0].path.endswith("hint-proposals.json") and "payload_sha256" in hit[0].message


def test_gzip_continuation_clean_then_tampered_archive(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    cont = run / "continuations" / "hint-00.json"
    doc = orjson.loads(cont.read_bytes())
    (cont).unlink()
    fx.write_bound(cont, doc["identity"], doc["payload"], force_gzip=True)
    assert check_run(run) == []
    archive = next((run / "continuations").glob("hint-00-*.json.gz"))
    import gzip

    inner = orjson.loads(gzip.decompress(archive.read_bytes()))
    inner["payload"]["hint"] = "tampered"
    archive.write_bytes(gzip.compress(orjson.dumps(inner)))
    hit = only(check_run(run), "bound_hash_mismatch")
    assert any("uncompressed_sha256" in p.message for p in hit)


def test_continuation_identity_not_bound_to_run_config(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    cont = run / "continuations" / "hint-00.json"
    doc = orjson.loads(cont.read_bytes())
    fx.write_bound(cont, {"run": "f" * 64, "hint": hint_sha256(fx.HINT)}, doc["payload"])
    hit = only(check_run(run), "bound_hash_mismatch")
    assert "identity.run" in hit[0].message


def test_request_identity_must_match_search_identity(tmp_path: Path) -> None:
    root, _ = search(tmp_path)
    doc = orjson.loads((root / "requests" / "round-00.json").read_bytes())
    fx.write_bound(root / "requests" / "round-00.json", {"search": "e" * 64, "round": 0}, doc["payload"])
    hit = only(check_search(root), "bound_hash_mismatch")
    assert hit[0].path.endswith("requests/round-00.json")


def test_judge_cache_response_hash(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    path = next((run / "judge-cache").glob("*.json"))
    doc = orjson.loads(path.read_bytes())
    doc["response"]["text"] = "changed"
    path.write_bytes(orjson.dumps(doc))
    hit = only(check_run(run), "bound_hash_mismatch")
    assert "response_sha256" in hit[0].message


# ----------------------------------------------------------------------------- file_hash_mismatch
def test_changed_episode_is_file_hash_mismatch(tmp_path: Path) -> None:
    root, rdir = search(tmp_path)
    (rdir / "episodes" / "hint-00-teacher.json").write_bytes(b'{"image_id": "other"}\n')
    problems = check_search(root)
    hit = only(problems, "file_hash_mismatch")
    # reported once per file even though the round row, the root row and the snapshot all bind it
    assert len([p for p in hit if p.path.endswith("hint-00-teacher.json")]) == 1
    assert "binds sha256" in hit[0].message


def test_changed_round_input_breaks_run_inputs_binding(tmp_path: Path) -> None:
    root, _ = search(tmp_path)
    (root / "round-inputs" / "round-00" / "public.json").write_bytes(b'{"task": "edited"}\n')
    hit = only(check_search(root), "file_hash_mismatch")
    assert hit[0].path.endswith("round-inputs/round-00/public.json")
    assert "public_context" in hit[0].message


def test_media_json_episode_binding(tmp_path: Path) -> None:
    root, rdir = search(tmp_path)
    fx.write_json(
        root / "round-inputs" / "round-00" / "media.json",
        {"episodes": [{"path": "/remote/runs/search-a/rounds/round-00/episodes/hint-00-teacher.json", "sha256": "a" * 64}]},
    )
    problems = check_search(root)
    assert any(p.code == "file_hash_mismatch" and p.path.endswith("hint-00-teacher.json") for p in problems)


def test_runtime_blob_named_by_wrong_hash(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    blob = next(run.glob("runtime/*/*/artifacts/sha256/*/*.txt"))
    blob.write_bytes(b"other bytes")
    hit = only(check_run(run), "file_hash_mismatch")
    assert hit[0].path == str(blob)


def test_wrapper_case_inputs_binding_is_checked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    key = "0123456789abcdef"
    cand = out / "case-inputs" / key / "candidate.json"
    data = fx.write_json(cand, {"candidate_id": "c"})
    fx.write_json(out / "progress.json", {"done": []})
    root = out / "repairs" / key
    built = fx.build_search(root, recorded=f"/remote/out/repairs/{key}")
    identity = dict(built["identity"])
    identity["inputs"] = dict(identity["inputs"], candidate={"path": f"/remote/out/case-inputs/{key}/candidate.json", "sha256": fx.sha(data)})
    fx.write_bound(root / "search-state.json", identity, built["payload"])
    ref = CaseRef(root, Layout.FEEDBACK_SEARCH, wrapper=out, key=key)
    problems = check_case(ref)
    # the requests file binds the old identity hash; everything else is clean
    assert {p.code for p in problems} == {"bound_hash_mismatch"}
    cand.write_bytes(b'{"candidate_id": "edited"}\n')
    hit = only(check_case(ref), "file_hash_mismatch")
    assert Path(hit[0].path) == cand.resolve() or hit[0].path.endswith(f"case-inputs/{key}/candidate.json")


def test_input_beside_the_moved_root_is_found_and_verified(tmp_path: Path) -> None:
    run = run_dir(tmp_path)  # written at /remote/runs/r, its trace at /remote/runs/inputs/source.json
    assert check_run(run) == []
    trace = tmp_path / "inputs" / "source.json"
    trace.write_bytes(trace.read_bytes().replace(b"img-1", b"img-2"))
    hit = only(check_run(run), "file_hash_mismatch")
    assert hit[0].path == str(trace) and "source trace" in hit[0].message


def test_missing_input_is_reported_once_with_where_it_was_looked_for(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (tmp_path / "inputs" / "source.json").unlink()
    problems = check_run(run)
    assert [p.code for p in problems] == ["missing_artifact"]
    p = problems[0]
    assert p.path == str(tmp_path / "inputs" / "source.json")
    assert "/remote/runs/inputs/source.json" in p.message and "source trace" in p.message and "--path-map" in p.message


# ----------------------------------------------------------------------------- missing_artifact
def test_missing_episode_and_continuation(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (run / "episodes" / "hint-00-teacher.json").unlink()
    (run / "continuations" / "hint-00.json").unlink()
    hit = only(check_run(run), "missing_artifact")
    paths = {Path(p.path).name for p in hit}
    assert {"hint-00-teacher.json", "hint-00.json"} <= paths


def test_missing_judge_file_named_by_bundle(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (run / "judge" / "hint-00.json").unlink()
    hit = only(check_run(run), "missing_artifact")
    assert hit[0].path.endswith("judge/hint-00.json") and "gemini-verification-bundle.json" in hit[0].message


def test_round_dir_without_run_inputs(tmp_path: Path) -> None:
    root, _ = search(tmp_path)
    (root / "rounds" / "round-01").mkdir()
    hit = only(check_search(root), "missing_artifact")
    assert [p.path for p in hit if "round-01" in p.path] == [str(root / "rounds" / "round-01" / "run-inputs.json")]
    assert "empty" in hit[0].message


def test_missing_media_file(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (run / "media" / f"{fx.IMAGE_SHA}.image").unlink()
    hit = only(check_run(run), "missing_artifact")
    assert hit[0].path.endswith(f"{fx.IMAGE_SHA}.image")


def test_missing_snapshot_file(tmp_path: Path) -> None:
    root, rdir = search(tmp_path)
    (rdir / "live-serving-check.json").unlink()
    hit = only(check_search(root), "missing_artifact")
    assert hit[0].path.endswith("round-00/live-serving-check.json")


# ----------------------------------------------------------------------------- path_outside_root
def test_symlink_out_of_the_case(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    outside = tmp_path / "secret.txt"
    outside.write_text("x")
    os.symlink(outside, run / "judge" / "link.json")
    hit = only(check_run(run), "path_outside_root")
    assert hit[0].path.endswith("judge/link.json")


def test_snapshot_path_escaping_with_dotdot(tmp_path: Path) -> None:
    root, _ = search(tmp_path)
    built = orjson.loads((root / "search-state.json").read_bytes())
    payload = built["payload"]
    payload["rounds"][0]["files"]["/remote/runs/search-a/rounds/round-00/../../../../etc/passwd"] = "0" * 64
    fx.write_bound(root / "search-state.json", built["identity"], payload)
    hit = only(check_search(root), "path_outside_root")
    assert "etc/passwd" in hit[0].message and hit[0].path.endswith("search-state.json")


def test_relative_episode_path_leaving_the_run(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    rewrite_jsonl(
        run / "repair_attempts.jsonl",
        lambda rows: rows[0]["continuation"].update(hinted_teacher_episode_trace="../../outside.json"),
    )
    hit = only(check_run(run), "path_outside_root")
    assert "../../outside.json" in hit[0].message


def test_absolute_snapshot_path_not_under_the_recorded_root(tmp_path: Path) -> None:
    root, _ = search(tmp_path)
    built = orjson.loads((root / "search-state.json").read_bytes())
    built["payload"]["rounds"][0]["files"]["/somewhere/else/file.json"] = "0" * 64
    fx.write_bound(root / "search-state.json", built["identity"], built["payload"])
    only(check_search(root), "path_outside_root")


# ----------------------------------------------------------------------------- leftover_tmp
def test_leftover_tmp(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (run / "manifest.json.tmp").write_bytes(b"{")
    hit = only(check_run(run), "leftover_tmp")
    assert hit[0].path.endswith("manifest.json.tmp") and "manifest.json" in hit[0].message


# ----------------------------------------------------------------------------- token_capture_incomplete
def test_incomplete_attempt_capture(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    rewrite_jsonl(
        run / "repair_attempts.jsonl",
        lambda rows: rows[0]["repair_rollout_token_capture"].update(status="incomplete", missing=["completion_logprobs"]),
    )
    hit = only(check_run(run), "token_capture_incomplete")
    assert "incomplete" in hit[0].message and "completion_logprobs" in hit[0].message


def test_absent_attempt_capture(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    rewrite_jsonl(run / "repair_attempts.jsonl", lambda rows: rows[0].pop("repair_rollout_token_capture"))
    hit = only(check_run(run), "token_capture_incomplete")
    assert "absent" in hit[0].message


def test_incomplete_teacher_action_in_continuation(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    cont = run / "continuations" / "hint-00.json"
    doc = orjson.loads(cont.read_bytes())
    doc["payload"]["teacher_steps"][0]["metadata"]["policy_token_capture"] = {"status": "incomplete", "missing": ["prompt_token_ids"]}
    fx.write_bound(cont, doc["identity"], doc["payload"])
    hit = only(check_run(run), "token_capture_incomplete")
    assert hit[0].path.endswith("continuations/hint-00.json")


def test_incomplete_source_step_capture_in_reachable_trace(tmp_path: Path) -> None:
    run = tmp_path / "r"
    fx.build_run(run, "/remote/runs/r")
    trace = {"state": {"all_steps": [{"stage": "unified_react"} for _ in range(3)] + [
        {"stage": "unified_react", "metadata": {"policy_token_capture": {"status": "incomplete", "missing": ["completion_token_ids"]}}}
    ]}}
    data = fx.write_json(run / "inputs" / "trace.json", trace)
    doc = orjson.loads((run / "run-inputs.json").read_bytes())
    config = doc["identity"]
    config["trace"] = {"path": "/remote/runs/r/inputs/trace.json", "sha256": fx.sha(data)}
    fx.write_bound(run / "run-inputs.json", config, doc["payload"])
    cont = orjson.loads((run / "continuations" / "hint-00.json").read_bytes())
    from eviscene_tui.artifacts.jsonio import canonical_sha256

    fx.write_bound(run / "continuations" / "hint-00.json", dict(cont["identity"], run=canonical_sha256(config)), cont["payload"])
    hit = only(check_run(run), "token_capture_incomplete")
    assert hit[0].path.endswith("inputs/trace.json") and "step 3" in hit[0].message


# ----------------------------------------------------------------------------- media_mismatch
def test_pad_runs_differ_from_image_count(tmp_path: Path) -> None:
    run = run_dir(tmp_path)

    def edit(rows):
        rows[0]["student_prompt_ids"] = rows[0]["student_prompt_ids"] + [248053, 248056, 248056, 248054]

    rewrite_jsonl(run / "repair_attempts.jsonl", edit)
    hit = only(check_run(run), "media_mismatch")
    assert any("student" in p.message and "2 image-pad run" in p.message for p in hit)


def test_image_bytes_replaced(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (run / "media" / f"{fx.IMAGE_SHA}.image").write_bytes(b"not the image")
    hit = only(check_run(run), "media_mismatch")
    assert len(hit) == 1 and hit[0].path.endswith(".image")


def test_pad_runs_without_psd_media_is_not_a_problem(tmp_path: Path) -> None:
    # a legacy record (older runtime) with image-pad runs but no psd_media: information only
    run = run_dir(tmp_path)
    rewrite_jsonl(run / "repair_attempts.jsonl", lambda rows: rows[0].pop("psd_media"))
    assert check_run(run) == []


def test_pad_id_family() -> None:
    assert pad_id_for_ids([151644, 1, 151655, 151655, 2]) == 151655
    assert pad_id_for_ids([248045, 151655]) == 248056
    assert pad_runs([1, 5, 5, 2, 5, 3, 5, 5], 5) == 3
    assert pad_runs([], 5) == 0


# ----------------------------------------------------------------------------- schema_unknown
def test_unknown_manifest_schema(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    fx.write_json(run / "manifest.json", {"schema_version": "ifv-psd-repair-driver-result-v9", "status": "generated"})
    hit = only(check_run(run), "schema_unknown")
    assert "ifv-psd-repair-driver-result-v9" in hit[0].message and "ifv-psd-repair-driver-result-v1" in hit[0].message


def test_unknown_media_and_row_schema(tmp_path: Path) -> None:
    run = run_dir(tmp_path)

    def edit(rows):
        rows[0]["psd_media"]["schema_version"] = "ifv-psd-media-v7"
        rows[0]["schema_version"] = 3

    rewrite_jsonl(run / "repair_attempts.jsonl", edit)
    hit = only(check_run(run), "schema_unknown")
    assert len(hit) == 2


# ----------------------------------------------------------------------------- unsupported_layout
def test_slate_is_unsupported(tmp_path: Path) -> None:
    slate = tmp_path / "slate"
    fx.write_bound(slate / "slate-state.json", {"mode": "slate"}, {"status": "searching"})
    (slate / "slate-rounds" / "00").mkdir(parents=True)
    hit = only(check_case(CaseRef(slate, Layout.SLATE)), "unsupported_layout")
    assert "slate" in hit[0].message


# ----------------------------------------------------------------------------- gate_resume_required
def test_a_round_the_gate_relocalized_is_gate_resume_required(tmp_path: Path) -> None:
    """A search paused by the driver's "child input changed on resume" ValueError after the
    operator gate relocalized that round: resume it under the gate (the command is named)."""
    root, _rdir = search(tmp_path)
    manifest = orjson.loads((root / "manifest.json").read_bytes())
    manifest.update(status="paused_execution_error", execution_error={"round": 0, "type": "ValueError"})
    (root / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert not [p for p in check_search(root) if p.code == "gate_resume_required"]  # no gate sidecar: not that state
    gate = root.parent / (root.name + ".eviscene-gate")
    (gate / "applied").mkdir(parents=True)
    (gate / "gate.json").write_bytes(orjson.dumps({"argv": ["/d/driver.py", "--output-dir", str(root)]}))
    (gate / "applied" / "round-00.json").write_bytes(orjson.dumps({"decision_id": "x", "action": "relocalize"}))
    hit = only(check_search(root), "gate_resume_required")
    assert "a plain --resume fails" in hit[0].message and "eviscene-tui gate --gate-dir" in hit[0].message
    assert hit[0].message.endswith("--output-dir " + str(root) + " --resume")


@pytest.mark.parametrize("code", [c.value for c in ProblemCode])
def test_every_code_has_a_test_above(code: str) -> None:
    names = [n for n in globals() if n.startswith("test_")]
    keywords = {
        "json_invalid": "json_invalid", "jsonl_torn_line": "torn", "bound_hash_mismatch": "bound_payload",
        "file_hash_mismatch": "episode_is_file_hash", "missing_artifact": "missing_", "path_outside_root": "symlink_out",
        "leftover_tmp": "leftover_tmp", "token_capture_incomplete": "capture", "media_mismatch": "pad_runs",
        "schema_unknown": "unknown_manifest_schema", "unsupported_layout": "slate", "gate_resume_required": "gate_resume_required",
        "not_regular_file": "fifo", "file_too_large": "too_large",
    }
    assert any(keywords[code] in n for n in names)
