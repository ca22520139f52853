"""Every hash in sample_runs verifies (with the jsonio helpers directly), and the damaged
case is damaged exactly where intended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eviscene_tui.artifacts.jsonio import (
    BOUND_GZIP_SCHEMA,
    canonical_sha256,
    hint_sha256,
    parse_jsonl_bytes,
    read_bound,
    sha256_bytes,
    sha256_file,
)
from eviscene_tui.scaffold.samples.builders import FAKE_BASE, FAKE_CWD
from eviscene_tui.scaffold.tiny import decode, special_id

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "sample_runs"
DAMAGED = ("damaged/", "damaged-unreadable-manifest/")
WITHOUT_INPUTS = ("single-copied-without-inputs/",)  # copied without its inputs on purpose
IMAGE_PAD = special_id("<|image_pad|>")


def local(path: str) -> Path:
    """Map one of the samples' fake absolute paths back into sample_runs/."""
    assert path.startswith(FAKE_BASE + "/"), path
    return SAMPLES / path[len(FAKE_BASE) + 1 :]


def local_runtime(path: str, *, source: bool) -> Path:
    """A recorded runtime store path: absolute, or relative to the working directory of
    its writer (the rollout's for the source store, the driver's for a run's stores)."""
    if path.startswith("/"):
        return local(path)
    cwd = FAKE_BASE if source else FAKE_CWD
    return local(f"{cwd}/{path}")


def inputs_of(case_root: Path) -> Path:
    """sample_runs/inputs/<slug>/ of a case folder: its inputs, beside the case roots."""
    return SAMPLES / "inputs" / rel(case_root).replace("/repairs/", "-")


def has_inputs(p: Path) -> bool:
    return not (rel(p) + "/").startswith(WITHOUT_INPUTS)


def rel(p: Path) -> str:
    return p.relative_to(SAMPLES).as_posix()


def clean(p: Path) -> bool:
    return not (rel(p) + "/").startswith(DAMAGED)


def json_files() -> list[Path]:
    return sorted(p for p in SAMPLES.rglob("*.json") if p.is_file())


def is_bound(doc: Any) -> bool:
    return isinstance(doc, dict) and (
        doc.get("schema_version") == BOUND_GZIP_SCHEMA or set(doc) == {"identity", "payload", "payload_sha256"}
    )


def load(p: Path) -> Any:
    return json.loads(p.read_bytes())


def attempt_rows(p: Path) -> list[dict[str, Any]]:
    rows, problems, _ = parse_jsonl_bytes(p.read_bytes(), str(p))
    assert not problems, problems
    return rows


def run_dirs() -> list[Path]:
    return sorted({p.parent for p in SAMPLES.rglob("run-inputs.json")})


def test_every_bound_envelope_verifies() -> None:
    seen = {"plain": 0, "gzip": 0}
    for p in json_files():
        try:
            doc = load(p)
        except ValueError:
            assert not clean(p), f"{rel(p)} does not parse"
            continue
        if not is_bound(doc):
            continue
        b = read_bound(p)
        if rel(p) == "damaged/requests/round-01.json":
            assert [x.code for x in b.problems] == ["bound_hash_mismatch"]
            continue
        assert b.ok, (rel(p), b.problems)
        assert b.payload_sha256 == canonical_sha256(b.payload)
        seen[b.form] += 1
    assert seen["plain"] > 20 and seen["gzip"] >= 5, seen


def test_run_inputs_bindings_and_identities() -> None:
    for run in run_dirs():
        b = read_bound(run / "run-inputs.json")
        assert b.ok and b.payload == {"status": "initialized"}
        ident = b.identity
        assert local(ident["output_dir"]) == run
        for key, value in ident.items():
            if isinstance(value, dict) and set(value) == {"path", "sha256"}:
                target = local(value["path"])
                if not has_inputs(run) and "/inputs/" in value["path"]:
                    assert not target.exists(), (rel(run), key)
                    continue
                assert target.is_file(), (rel(run), key)
                assert sha256_file(target) == value["sha256"], (rel(run), key)
                # the researcher's inputs live outside the case root, beside it; only the
                # files the search itself wrote for a round (round-inputs, an earlier
                # round's localization) are bound from inside it
                assert rel(target).startswith("inputs/") or "/round-inputs/" in value["path"] or "/rounds/" in value["path"], (rel(run), key)
        for name in ("hint-proposals.json",):
            if (run / name).exists():
                hp = read_bound(run / name)
                assert hp.identity == ident
        for cont in sorted((run / "continuations").glob("hint-??.json")):
            cb = read_bound(cont)
            if not clean(cont):
                continue
            assert cb.ok, rel(cont)
            assert cb.identity == {"run": canonical_sha256(ident), "hint": hint_sha256(cb.payload["hint"])}


def test_search_state_files_maps_records_and_requests() -> None:
    roots = sorted({p.parent for p in SAMPLES.rglob("search-state.json")})
    assert len(roots) == 7
    for root in roots:
        st = read_bound(root / "search-state.json")
        assert st.ok
        assert local(st.identity["inputs"]["output_dir"]) == root
        manifest = load(root / "manifest.json")
        assert manifest["status"] == st.payload["status"]
        assert [local(d) for d in manifest["rounds"]] == sorted(root.glob("rounds/round-??"))
        aggregate: list[dict[str, Any]] = []
        for row in st.payload["rounds"]:
            for path, sha in row["files"].items():
                target = local(path)
                if clean(root):
                    assert sha256_file(target) == sha, path
            for rec in row["records"]:
                ep = local(rec["continuation"]["hinted_teacher_episode_trace"])
                if clean(root):
                    assert sha256_file(ep) == rec["continuation"]["hinted_teacher_episode_trace_sha256"]
            aggregate.extend(row["records"])
        if clean(root):
            assert attempt_rows(root / "repair_attempts.jsonl") == aggregate
        ident_sha = canonical_sha256(st.identity)
        for req in sorted(root.glob("requests/round-??.json")):
            rb = read_bound(req)
            n = int(req.stem.split("-")[1])
            assert rb.identity == {"search": ident_sha, "round": n}
            public = load(root / f"round-inputs/round-{n:02d}/public.json")
            if clean(req):
                assert public["repair_search"] == rb.payload
            media = load(root / f"round-inputs/round-{n:02d}/media.json")
            for ep in media["episodes"]:
                if clean(root):
                    assert sha256_file(local(ep["path"])) == ep["sha256"]


def test_converged_feedback_objects() -> None:
    root = SAMPLES / "feedback-converged-3-rounds"
    fb = [read_bound(root / f"requests/round-{n:02d}.json").payload for n in range(3)]
    assert fb[0] == {"previous_rounds": [], "locked_hint": "", "excluded_hints": [], "needs_relocalization": False, "anchor_feedback": {}}
    assert fb[1]["needs_relocalization"] is True and fb[1]["locked_hint"] == ""
    assert fb[1]["anchor_feedback"]["checker"]["anchor_matches"] is False
    assert fb[1]["anchor_feedback"]["selected_source_step"] == 3
    assert fb[2]["needs_relocalization"] is False
    assert fb[2]["locked_hint"] and len(fb[2]["excluded_hints"]) == 2
    hint2 = attempt_rows(root / "rounds/round-02/repair_attempts.jsonl")[0]["hint_record"]["text"]
    assert hint2.startswith(fb[2]["locked_hint"] + "\n")
    loc0 = load(root / "rounds/round-00/semantic-localization.json")
    loc1 = load(root / "rounds/round-01/semantic-localization.json")
    assert (root / "rounds/round-02/semantic-localization.json").read_bytes() == (root / "rounds/round-01/semantic-localization.json").read_bytes()
    assert loc0["candidates"][0]["source_step_index"] == 3 and loc1["candidates"][0]["source_step_index"] == 1
    rows = attempt_rows(root / "repair_attempts.jsonl")
    assert [r["accepted"] for r in rows] == [False, False, True]
    final = rows[-1]
    assert final["repair_tier"] == "causal_episode_pass"
    assert all(final[k] for k in ("source_rollout_failed", "hinted_local_pass", "hinted_episode_pass", "hinted_strict_trace_audit_pass"))
    assert final["verification"]["hinted_recorded_verdict"].lower() == final["verification"]["expected_verdict"].lower()
    assert all(r["continuation"]["hinted_teacher_episode_trace"].startswith(FAKE_BASE) for r in rows)
    cands = attempt_rows(root / "repair_candidates.jsonl")
    assert len(cands) == 2 and len({c["candidate_id"] for c in cands}) == 2
    audits = load(root / "rounds/round-02/proposer-hint-audits.json")["proposals"]
    assert audits[0] == {"passed": False, "reason": "changed_verified_hint"}


def _check_run_records(run: Path) -> int:
    count = 0
    path = run / "repair_attempts.jsonl"
    if not path.exists():
        return 0
    proposals = {p["proposal_id"]: p for p in read_bound(run / "hint-proposals.json").payload}
    ident = read_bound(run / "run-inputs.json").identity
    trace_path = local(ident["trace"]["path"])
    trace = load(trace_path)
    trace_sha = sha256_file(trace_path)
    for rec in attempt_rows(path):
        count += 1
        assert rec["source_trace_sha256"] == trace_sha
        cont = rec["continuation"]
        episode_path = run / cont["hinted_teacher_episode_trace"]
        assert sha256_file(episode_path) == cont["hinted_teacher_episode_trace_sha256"]
        episode = load(episode_path)
        hint = rec["hint_record"]["text"]
        prop = proposals[rec["attempt_id"]]
        assert prop["text"] == hint
        assert rec["attempt_id"] == "psd-repair-hint:" + canonical_sha256({"candidate_id": rec["repair_site"]["step_id"], "hint": hint, "level": 1})
        assert rec["hint_record"]["audit"]["hint_sha256"] == hint_sha256(hint)
        ssi = rec["repair_site"]["source_step_index"]
        src_steps = trace["state"]["all_steps"]
        # episode prefix byte-equal to the source, teacher suffix marked
        assert episode["state"]["all_steps"][:ssi] == src_steps[:ssi]
        suffix = episode["state"]["all_steps"][ssi:]
        assert suffix and all(s["metadata"]["psd_role"] == "teacher" and s["metadata"]["psd_suffix_step"] for s in suffix)
        assert suffix[-1]["stage"] == "unified_judgment"
        src_step = src_steps[ssi]
        assert rec["repair_site"]["policy_input_sha256"] == canonical_sha256(src_step["metadata"]["policy_input"])
        assert rec["student_prompt_ids"] == src_step["metadata"]["policy_token_capture"]["prompt_token_ids"]
        # teacher prompt = student prompt + one inserted span holding the hint
        s_ids, t_ids = rec["student_prompt_ids"], rec["teacher_prompt_ids"]
        pre = 0
        while s_ids[pre] == t_ids[pre]:
            pre += 1
        post = 0
        while post < len(s_ids) - pre and s_ids[-1 - post] == t_ids[-1 - post]:
            post += 1
        assert pre + post == len(s_ids)
        assert decode(t_ids[pre : len(t_ids) - post]).find(hint.split("\n")[0][:30]) >= 0
        for ids in (s_ids, t_ids):
            start = ids.index(IMAGE_PAD)
            run_len = 0
            while ids[start + run_len] == IMAGE_PAD:
                run_len += 1
            assert run_len == 12 and ids.count(IMAGE_PAD) == 12
            assert ids[start - 1] == special_id("<|vision_start|>") and ids[start + 12] == special_id("<|vision_end|>")
        cap = rec["repair_rollout_token_capture"]
        assert cap["status"] == "complete" and cap["completion_token_ids"] == rec["completion_ids"]
        assert len(cap["completion_logprobs"]) == len(cap["completion_topk_by_position"]) == len(rec["completion_ids"])
        assert all(len(row) == cap["topk"] for row in cap["completion_topk_by_position"])
        # media
        media = rec["psd_media"]
        shas = media["image_sha256"] if media["schema_version"] == "ifv-psd-media-v3" else [media["sha256"]]
        for sha in shas:
            assert sha256_file(run / "media" / f"{sha}.image") == sha
        # judge artifact, when judged
        lv = rec["local_verification"]
        if lv:
            judge = load(run / lv["artifact"])
            assert judge["teacher_prompt_sha256"] == canonical_sha256(t_ids)
            assert judge["teacher_completion_sha256"] == canonical_sha256(rec["completion_ids"])
            assert judge["teacher_episode_canonical_sha256"] == canonical_sha256(episode)
            assert judge["hint_sha256"] == hint_sha256(hint)
            assert judge["source_trace_sha256"] == trace_sha
            assert [c["name"] for c in judge["checks"]] == [
                "source_error_confirmed", "repaired_at_selected_step", "grounded_episode", "procedural_hint", "anchor_matches", "episode_complete",
            ]
            assert judge["passed"] == all(c["passed"] for c in judge["checks"]) == judge["review"]["passed"]
            private = load(local(ident["private_context"]["path"]))
            assert judge["private_reference_sha256"] == canonical_sha256(private)
    return count


def test_attempt_records_episodes_media_and_judges() -> None:
    total = 0
    for run in run_dirs():
        if clean(run) and has_inputs(run):
            total += _check_run_records(run)
    assert total >= 8


def test_runtime_archives_are_consistent() -> None:
    stores = sorted({p.parent for p in SAMPLES.rglob("events.jsonl")})
    assert len(stores) > 30
    requests = 0
    for store in stores:
        data = (store / "events.jsonl").read_bytes()
        rows, problems, torn = parse_jsonl_bytes(data, "events")
        assert not problems or (torn and rel(store).startswith("single-generating/runtime/")), rel(store)
        assert [r["sequence"] for r in rows] == list(range(1, len(rows) + 1))
        for ctx in sorted((store / "context").glob("req-*.json")):
            requests += 1
            m = load(ctx)
            assert m["schema_version"] == "ifv-context-ledger-v1" and m["request_id"] == ctx.stem
            restored: dict[str, Any] = {"tool_schema": [], "response_format": None}
            for item in m["context_items"]:
                art = item["artifact"]
                blob = (store / art["path"]).read_bytes()
                assert sha256_bytes(blob) == art["sha256"] == item["content_hash"]
                meta = load(store / f"artifacts/sha256/{art['sha256'][:2]}/{art['sha256']}.meta.json")
                assert meta["size_bytes"] == len(blob) == art["size_bytes"]
                for img in item["media"]:
                    assert sha256_file(store / img["path"]) == img["sha256"]
                    assert (store / img["path"]).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
                value = blob.decode("utf-8") if item["kind"] == "system_prompt" else json.loads(blob)
                if item["kind"] == "tool_schema":
                    restored["tool_schema"].append(value)
                else:
                    restored[item["kind"]] = value
            assert canonical_sha256(restored) == m["request_snapshot_sha256"], rel(ctx)
    assert requests > 60


def test_trace_steps_point_into_their_archives() -> None:
    traces = sorted(SAMPLES.glob("inputs/*/trace.json"))
    assert len(traces) == 11
    for trace_path in traces:
        trace = load(trace_path)
        store = local_runtime(trace["state"]["runtime_store"]["runtime_path"], source=True)
        assert store.parent.parent == trace_path.parent / "runtime"  # the rollout's archive sits next to its trace
        assert (store / "events.jsonl").is_file()
        assert trace["state"]["runtime_case"]["image_sha256"] == sha256_file(local(trace["state"]["image_path"]))
        for step in trace["state"]["all_steps"]:
            md = step["metadata"]
            assert (step.get("stage") or step.get("stage_name")) in ("unified_react", "unified_judgment")
            ctx = load(store / "context" / f"{md['context_request_id']}.json")
            payload_item = next(i for i in ctx["context_items"] if i["kind"] == "input_payload")
            assert json.loads((store / payload_item["artifact"]["path"]).read_bytes()) == md["policy_input"]["input_payload"]
            cap = md["policy_token_capture"]
            assert cap["status"] == "complete"
            text = decode(cap["completion_token_ids"])
            assert text.endswith("<|im_end|>")
    legacy = [p for p in traces if '"stage_name":"unified_react"' in p.read_text()]
    assert {rel(p).split("/")[1] for p in legacy} == {"search-paused-execution-error", "single-generating"}
    for p in legacy:  # older runtimes: runtime paths relative to the writer's working directory
        assert not load(p)["state"]["runtime_store"]["runtime_path"].startswith("/")


def test_semantic_localizations_bind_their_trace() -> None:
    for p in sorted(SAMPLES.rglob("semantic-localization.json")):
        doc = load(p)
        case_root = p.parent if p.parent.parent.name != "rounds" else p.parent.parent.parent
        if not has_inputs(case_root):
            continue
        trace = load(inputs_of(case_root) / "trace.json")
        assert doc["source_trace_canonical_sha256"] == canonical_sha256(trace), rel(p)
        for cand in doc["candidates"]:
            for basis in cand["observed_basis"]:
                step = trace["state"]["all_steps"][basis["step_index"]]
                assert basis["quote"] in (step.get("thought") or "") + (step.get("tool_result") or "")


@pytest.mark.parametrize(
    "path,expect",
    [
        ("damaged/rounds/round-00/manifest.json", "truncated"),
        ("damaged/rounds/round-00/episodes/hint-00-teacher.json", "missing"),
        ("damaged/manifest.json.tmp", "present"),
    ],
)
def test_damaged_case_is_damaged_as_intended(path: str, expect: str) -> None:
    p = SAMPLES / path
    if expect == "missing":
        assert not p.exists()
    elif expect == "present":
        assert p.is_file()
    else:
        with pytest.raises(ValueError):
            json.loads(p.read_bytes())


def test_damaged_hashes_do_not_verify() -> None:
    root = SAMPLES / "damaged"
    st = read_bound(root / "search-state.json")
    row1 = st.payload["rounds"][1]
    ep = row1["records"][0]["continuation"]
    assert sha256_file(local(ep["hinted_teacher_episode_trace"])) != ep["hinted_teacher_episode_trace_sha256"]
    media = row1["records"][0]["psd_media"]
    image = root / "rounds/round-01/media" / f"{media['image_sha256'][0]}.image"
    assert sha256_file(image) != media["image_sha256"][0]
    rows, problems, torn = parse_jsonl_bytes((root / "repair_attempts.jsonl").read_bytes(), "x")
    assert len(rows) == 1 and torn and [p.code for p in problems] == ["jsonl_torn_line"]
    r00 = (root / "rounds/round-00/repair_attempts.jsonl").read_bytes()
    # the escape: a written path that names an existing privileged file beside the root
    assert b'"hinted_teacher_episode_trace":"../../../inputs/feedback-converged-3-rounds/private-context.json"' in r00
    assert (SAMPLES / "inputs/feedback-converged-3-rounds/private-context.json").is_file()
    judge = load(root / "rounds/round-01/judge/hint-00.json")
    assert judge["schema_version"] == "ifv-psd-local-verification-v9"


def test_hostile_strings_are_present_raw() -> None:
    trace = (SAMPLES / "inputs/hostile-strings/trace.json").read_text(encoding="utf-8")
    doc = json.loads(trace)
    texts = json.dumps(doc, ensure_ascii=False)
    assert "[@click=app.quit]x[/]" in texts and "\u202e" in texts
    steps = doc["state"]["all_steps"]
    for needle in ("\x1b[31m", "\x1b]0;", "\x1b[2J", "\x1b]52;"):
        assert needle in steps[0]["tool_result"], needle
    assert "\u202e" in steps[2]["tool_result"] and "\x1b]8;;" in steps[3]["thought"]
    assert "[@click=app.quit]" in steps[1]["thought"]
    hint = attempt_rows(SAMPLES / "hostile-strings/repair_attempts.jsonl")[0]["hint_record"]["text"]
    assert "\x1b]0;" in hint and "[@click=app.quit]" in hint


def test_jsonl_rows_hold_raw_unicode_line_separators() -> None:
    data = (SAMPLES / "hostile-strings/repair_attempts.jsonl").read_bytes()
    assert "\u2028".encode() in data and "\u2029".encode() in data and "\u0085".encode() in data
    rows, problems, _ = parse_jsonl_bytes(data, "x")
    assert len(rows) == 1 and not problems
    assert data.decode("utf-8").splitlines() != data.decode("utf-8").split("\n")[:-1]  # str.splitlines would tear it


def test_serving_profile_passes_the_driver_gate() -> None:
    """profile_id == --policy-model, model_path == --round-start-checkpoint, base_url, live check."""
    profile = load(SAMPLES / "serving-profile.json")
    assert profile["schema_version"] == "ifv-qwen-serving-profile-v1" and profile["context_length"] == 131072
    for run in run_dirs():
        ident = read_bound(run / "run-inputs.json").identity
        if not has_inputs(run):
            continue
        prof_path = local(ident["policy_serving_profile"]["path"])
        assert prof_path.read_bytes() == (SAMPLES / "serving-profile.json").read_bytes()
        assert ident["policy_model"] == profile["profile_id"]
        assert ident["round_start_checkpoint"] == profile["model_path"]
        assert ident["policy_base_url"] == profile["base_url"].rstrip("/")
        assert ident["policy_wire_api"] == profile["wire_api"]
        live = run / "live-serving-check.json"
        if live.exists():
            assert load(live) == {"model_id": profile["profile_id"], "root": profile["engine_model_path"], "max_model_len": profile["context_length"]}


def test_manifest_artifact_references_exist() -> None:
    for manifest in sorted(SAMPLES.rglob("manifest.json")):
        if not clean(manifest):
            continue
        doc = load(manifest)
        for name in (doc.get("artifacts") or {}).values():
            assert (manifest.parent / name).is_file(), (rel(manifest), name)
        runtime = doc.get("runtime_archive")
        if runtime:
            store = local_runtime(runtime, source=False)
            assert (store / "events.jsonl").is_file(), (rel(manifest), runtime)
            assert store.is_relative_to(manifest.parent), (rel(manifest), runtime)  # the run's own store
    for err in sorted(SAMPLES.rglob("generation-last-error.json")):
        doc = load(err)
        store = local_runtime(doc["archive"], source=False)
        assert (store / "events.jsonl").is_file() and store.is_relative_to(err.parent)
