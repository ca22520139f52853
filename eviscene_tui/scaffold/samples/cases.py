"""The sample cases of ``sample_runs/`` (see ``EXPECTED`` for what ``check`` must say)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_jsonl_bytes, pretty_json_bytes
from eviscene_tui.scaffold.samples.builders import Case, RuntimeStore, hexid, serving_profile
from eviscene_tui.scaffold.samples.runs import Judgement, RunBuilder, SearchBuilder, judgement
from eviscene_tui.scaffold.samples.stories import FLOOD, PROTEST
from eviscene_tui.scaffold.samples.tree import Tree

# hints -------------------------------------------------------------------------------
H_FLOOD_0 = "Before searching again, reread what the earlier tool results already say about where the image came from."
H_FLOOD_1 = "Open the oldest reverse-image match and compare its date with the claimed event before searching the event itself."
H_FLOOD_2 = H_FLOOD_1 + "\nQuote the publication date you find before you judge."
H_PROTEST_0 = "Check whether every match of the image supports the claimed date before relying on one of them."
H_PROTEST_1 = "When copies of the image have different dates, open the oldest copy first."

HOSTILE = {
    # a raw (non-JSON) tool result with live escape sequences: CSI colour, OSC title, clear screen, OSC 52 clipboard
    0: {
        "result": "match 1/1: Cyclone \x1b[31mIdai\x1b[0m floods Beira\x1b]0;pwned-title\x1b\\ (2019-03-18)"
        "\x1b[2J\x1b[H \x1b]52;c;ZXZpbCBjbGlwYm9hcmQ=\x07 https://news.example.org/2019/idai-beira",
    },
    # Textual/Rich markup and an unbalanced close tag in a thought
    1: {"thought": "The claim is about Valencia [@click=app.quit]x[/] so search the event. [/] [b]bold?"},
    # a JSON tool result with bidi overrides, C0/C1 controls and line/paragraph separators
    2: {
        "result": json.dumps(
            {"title": "DANA floods \u202eaicnelaV\u202c", "text": "Streets flooded [/bold] \x07\x08\x7f\u0085 on 29-30 October 2024.\u2028next\u2029para"},
            ensure_ascii=False,
        ),
    },
    3: {"thought": "\x1b[2J\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ \u202eesrever\u202c search again"},
}


def _loc(case: Case, anchor: int | None, category: str | None, seed: str, **kw: Any) -> dict[str, Any]:
    return case.localization(anchor, category, seed=seed, **kw)


def _new_case(tree: Tree, rel: str, story, case_id: str, *, legacy: bool = False, hostile=None) -> Case:
    # older runtimes (the legacy ``stage_name`` traces) record runtime paths relative to
    # the working directory of the process that wrote them
    case = Case(tree, rel, story, case_id, legacy_stage_name=legacy, relative_runtime=legacy)
    case.write_inputs()
    case.build_source(hostile=hostile)
    case.write_case_inputs()
    return case


def _round(
    sb: SearchBuilder,
    n: int,
    *,
    semantic_input_rel: str,
    loc: dict[str, Any] | None = None,
    copy_from: str | None = None,
    hints: list[str],
    rejected: list[str] | None = None,
    verdict: Judgement | None = None,
    force_gzip: bool | None = True,
    media_schema: str = "v3",
    judge_errors: list[dict[str, Any]] | None = None,
    close: bool = True,
) -> RunBuilder:
    case = sb.case
    _fb, public_rel, media_rel = sb.open_round(n)
    rb = RunBuilder(case, f"rounds/round-{n:02d}", hint_count=1, public_rel=public_rel, media_rel=media_rel,
                    semantic_input_rel=semantic_input_rel, budgets=(sb.max_attempts, sb.max_proposals, sb.max_seconds))
    rb.begin(loc, copy_from=copy_from)
    rb.propose(hints, rejected)
    att = rb.generate(0, force_gzip=force_gzip, media_schema=media_schema)
    rb.manifest_progress()
    if att is not None:
        rb.backup_pre_finalize()  # the first finalize keeps the rows as generated
    if att is not None and verdict is not None:
        rb.judge(att, verdict)
        rb.write_attempts()
    rb.finalize(errors=judge_errors)
    rb.manifest_final()
    if close:
        sb.close_round(rb, status="generated")
    return rb


# --------------------------------------------------------------------------- cases
def feedback_converged(tree: Tree, rel: str = "feedback-converged-3-rounds", case_id: str = "case-flood-valencia-0007",
                       *, media_schema: str = "v3") -> Case:
    """round-00 anchor mismatch -> round-01 relocalized (locks the hint) -> round-02 accepted."""
    c = _new_case(tree, rel, FLOOD, case_id)
    c.json("inputs/semantic-verification.json", _loc(c, 3, "ignored_repeated_no_match", "input")["doc"])
    sb = SearchBuilder(c)
    _round(sb, 0, semantic_input_rel="inputs/semantic-verification.json", copy_from="inputs/semantic-verification.json",
           hints=[H_FLOOD_0],
           verdict=judgement(anchor_ok=False, repaired=False, earliest=1,
                             why="The first error is at step 1: the agent ignored the 2019 match; step 3 is downstream."))
    fb = sb.feedback()
    _round(sb, 1, semantic_input_rel="rounds/round-00/semantic-localization.json",
           loc=_loc(c, 1, "wrong_search_direction", "relocalize-1", previous=fb["anchor_feedback"],
                    explanation="Relocalized after anchor disagreement: step 1 searches the claimed event instead of the 2019 match."),
           hints=[H_FLOOD_1], force_gzip=False,
           verdict=judgement(grounded=False, earliest=1, why="Right step and procedure, but the verdict cites no date from the opened page."))
    _round(sb, 2, semantic_input_rel="rounds/round-01/semantic-localization.json", copy_from="rounds/round-01/semantic-localization.json",
           hints=[H_FLOOD_2], rejected=["changed_verified_hint"], force_gzip=True, media_schema=media_schema,
           verdict=judgement(earliest=1, why="The teacher opens the 2019 page at the anchor and quotes its date."))
    sb.finish("converged", gzip_state=True)
    return c


def search_no_recoverable_site(tree: Tree) -> Case:
    c = _new_case(tree, "search-no-recoverable-site", PROTEST, "case-rally-tbilisi-0042")
    # the candidate the rollout gate bound: a terminal outcome mismatch, observed at the
    # final judgment step, still to be localized (what the "why no site" panel shows)
    last = len(c.trace["state"]["all_steps"]) - 1
    c.json("inputs/candidate.json", {**c.seed_candidate(), "failure_localization": {
        "status": "requires_localization", "basis": "terminal_outcome_mismatch", "requires_privileged_attribution": True,
        "observed_failure_source_step_indices": [last], "repair_anchor_step_index": None,
        "repair_anchor_source_step_index": None, "repair_anchor_step_id": None, "repair_signal": "terminal_outcome_mismatch"}})
    # the localizer blames an event no step of the trace shows (no tool timed out)
    why = "No recoverable policy step: an external retrieval timeout cut the search off before the original source was reached."
    c.json("inputs/semantic-verification.json", _loc(c, None, None, "input", closest=3, explanation=why)["doc"])
    sb = SearchBuilder(c)
    sb.open_round(0)
    rb = RunBuilder(c, "rounds/round-00", hint_count=1, public_rel="round-inputs/round-00/public.json",
                    media_rel="round-inputs/round-00/media.json")
    rb.start()
    rb.localize(copy_from="inputs/semantic-verification.json")
    rb.no_recoverable_site()
    sb.close_round(rb, status="no_recoverable_site")
    sb.finish("no_further_grounded_hint")
    return c


def search_paused_pending(tree: Tree) -> Case:
    """round-00 generated its attempt but the judge call timed out: the row stays pending."""
    c = _new_case(tree, "search-paused-pending-verifier", PROTEST, "case-rally-tbilisi-0108")
    c.json("inputs/semantic-verification.json", _loc(c, 1, "wrong_search_direction", "input")["doc"])
    sb = SearchBuilder(c)
    _round(sb, 0, semantic_input_rel="inputs/semantic-verification.json", copy_from="inputs/semantic-verification.json",
           hints=[H_PROTEST_1], verdict=None, judge_errors=[{"hint_index": 0, "error_type": "ReadTimeout"}], close=False)
    # the operator resumed once: every driver invocation opens a new (here empty) proposer store
    RuntimeStore(c, "rounds/round-00/runtime", f"psd-proposer-{hexid(c.case_id, 'resume-1')}", clock=c.tick(3600)).finish()
    sb.finish("paused_pending_verifier", extra_elapsed=388.0)
    return c


def search_paused_execution_error(tree: Tree) -> Case:
    c = _new_case(tree, "search-paused-execution-error", FLOOD, "case-flood-valencia-0311", legacy=True)
    c.json("inputs/semantic-verification.json", _loc(c, 1, "wrong_search_direction", "input")["doc"])
    sb = SearchBuilder(c)
    _fb, public_rel, media_rel = sb.open_round(0)
    rb = RunBuilder(c, "rounds/round-00", hint_count=1, public_rel=public_rel, media_rel=media_rel)
    rb.begin(copy_from="inputs/semantic-verification.json")
    rb.propose([H_FLOOD_1])
    rb.generate(0, teacher_capture="incomplete")
    sb.finish("paused_execution_error", execution_error={"round": 0, "type": "ValueError"}, extra_elapsed=96.0)
    return c


def single_no_admissible(tree: Tree) -> Case:
    c = _new_case(tree, "single-no-admissible-hints", PROTEST, "case-rally-tbilisi-0215")
    c.json("inputs/semantic-verification.json", _loc(c, 1, "wrong_search_direction", "input")["doc"])
    rb = RunBuilder(c, "", hint_count=5)
    rb.begin(copy_from="inputs/semantic-verification.json")
    rb.propose([], ["binary_verdict_leak", "hint_too_long", "private_value_leak", "internal_term_leak", "structured_action_scaffold_leak"])
    rb.write_attempts()
    rb.manifest_final(finalized=False)
    return c


def single_generating(tree: Tree) -> Case:
    c = _new_case(tree, "single-generating", FLOOD, "case-flood-valencia-0420", legacy=True)
    c.json("inputs/semantic-verification.json", _loc(c, 1, "wrong_search_direction", "input")["doc"])
    rb = RunBuilder(c, "", hint_count=2)
    rb.begin(copy_from="inputs/semantic-verification.json")
    rb.propose([H_FLOOD_1, H_FLOOD_0])
    rb.generate(0, try_count=2)  # retry 0 failed with ReadTimeout: generation-last-error.json stays (stale)
    rb.manifest_progress()
    # hint-01 is being generated right now: its store holds a started request and a torn last event
    live = RuntimeStore(c, "runtime", f"hint-01-{hexid(c.case_id, '', 1, 0, 'try')}", clock=c.tick())
    live._event("context_request_started", {"request_id": "req-000001", "stage": "psd_teacher_repair"})
    live.finish(torn_tail=b'{"attempt_id":"hint-01-')
    return c


def hostile_strings(tree: Tree) -> Case:
    c = _new_case(tree, "hostile-strings", FLOOD, "case-flood-\u202ehostile\x1b[0m-0666", hostile=HOSTILE)
    c.json("inputs/semantic-verification.json", _loc(c, 1, "wrong_search_direction", "input")["doc"])
    rb = RunBuilder(c, "", hint_count=1)
    rb.begin(copy_from="inputs/semantic-verification.json")
    # U+2028 / U+2029 / U+0085 stay raw inside JSONL rows: readers must split on "\n" only
    rb.propose([H_FLOOD_1 + " [@click=app.quit]x[/] \x1b]0;hint\x07 \u202edesrever\u202c\u2028line\u2029para\u0085end"])
    att = rb.generate_attempt(0)
    rb.manifest_progress()
    rb.backup_pre_finalize()
    rb.judge(att, judgement(earliest=1, why="Grounded repair [/] \x1b[5mblink\x1b[0m."))
    rb.write_attempts()
    rb.finalize()
    rb.manifest_final()
    return c


def copied_without_inputs(tree: Tree) -> Case:
    """A finished single run rsynced without its inputs: the trace, candidate, contexts
    and the source rollout stayed on the cluster. Everything the run wrote still shows."""
    c = _new_case(tree, "single-copied-without-inputs", PROTEST, "case-rally-tbilisi-0388")
    c.json("inputs/semantic-verification.json", _loc(c, 1, "wrong_search_direction", "input")["doc"])
    rb = RunBuilder(c, "", hint_count=1)
    rb.begin(copy_from="inputs/semantic-verification.json")
    rb.propose([H_PROTEST_1])
    att = rb.generate_attempt(0)
    rb.manifest_progress()
    rb.backup_pre_finalize()
    rb.judge(att, judgement(earliest=1, why="Opened the oldest copy at the anchor."))
    rb.write_attempts()
    rb.finalize()
    rb.manifest_final()
    for rel in [r for r in tree.files if r.startswith(c.inputs_rel + "/")]:
        del tree.files[rel]
    return c


def multi_case(tree: Tree) -> list[Case]:
    """``run_psd_feedback_canary.py`` output: repairs/<key>/ per case + case-inputs + inputs.json + progress.json."""
    base = "multi-case"
    specs = [("case-flood-valencia-0512", FLOOD), ("case-rally-tbilisi-0733", PROTEST)]
    keys = []
    for case_id, story in specs:
        probe = Case(Tree(), "probe", story, case_id)
        keys.append((hashlib.sha256(probe.seed_candidate_id.encode("utf-8")).hexdigest()[:16], probe.seed_candidate_id))
    cases = []
    # case 1: converged in one round, legacy psd_media v1
    (k1, cid1), (k2, cid2) = keys
    c1 = _new_case(tree, f"{base}/repairs/{k1}", FLOOD, specs[0][0])
    c1.json("inputs/semantic-verification.json", _loc(c1, 1, "wrong_search_direction", "input")["doc"])
    sb1 = SearchBuilder(c1)
    _round(sb1, 0, semantic_input_rel="inputs/semantic-verification.json", copy_from="inputs/semantic-verification.json",
           hints=[H_FLOOD_2], media_schema="v1", verdict=judgement(earliest=1, why="Repaired at the anchor."))
    sb1.finish("converged", gzip_state=True)
    cases.append(c1)
    # case 2: one rejected round with an attempt budget of 1
    c2 = _new_case(tree, f"{base}/repairs/{k2}", PROTEST, specs[1][0])
    c2.json("inputs/semantic-verification.json", _loc(c2, 2, "incomplete_event_verification", "input")["doc"])
    sb2 = SearchBuilder(c2, max_attempts=1, max_proposals=1, max_seconds=3600)
    _round(sb2, 0, semantic_input_rel="inputs/semantic-verification.json", copy_from="inputs/semantic-verification.json",
           hints=[H_PROTEST_0], verdict=judgement(anchor_ok=False, repaired=False, earliest=1, why="Error starts at step 1."))
    sb2.finish("attempt_budget_exhausted")
    cases.append(c2)
    # wrapper files
    rows = []
    for (key, cand_id), case in zip(keys, cases):
        ci = f"{base}/case-inputs/{key}"
        tree.put(f"{ci}/candidate.json", case.get("inputs/candidate.json"))
        tree.put(f"{ci}/gold.json", case.get("inputs/gold.json"))
        tree.put(f"{ci}/public.json", case.get("inputs/public-context.json"))
        rows.append(
            {
                "key": key,
                "candidate_id": cand_id,
                "case_id": case.case_id,
                "candidate": {"path": f"{tree.base}/{ci}/candidate.json", "sha256": case.sha("inputs/candidate.json")},
                "gold": {"path": f"{tree.base}/{ci}/gold.json", "sha256": case.sha("inputs/gold.json")},
                "public": {"path": f"{tree.base}/{ci}/public.json", "sha256": case.sha("inputs/public-context.json")},
                "search_root": f"{tree.base}/{base}/repairs/{key}",
            }
        )
    tree.bound(
        f"{base}/inputs.json",
        {"version": "ifv-psd-feedback-canary-v1", "output_dir": f"{tree.base}/{base}", "max_attempts": 6, "max_proposals": 12},
        {"cases": rows},
    )
    tree.json(
        f"{base}/progress.json",
        {
            "schema_version": "ifv-psd-feedback-canary-progress-v1",
            "status": "complete",
            "total": 2,
            "completed": 2,
            "cases": [
                {"key": k1, "candidate_id": cid1, "status": "converged", "search_root": f"repairs/{k1}"},
                {"key": k2, "candidate_id": cid2, "status": "attempt_budget_exhausted", "search_root": f"repairs/{k2}"},
            ],
        },
    )
    merged_attempts = b"".join(case.get("repair_attempts.jsonl") for case in cases)
    merged_candidates = b"".join(case.get("repair_candidates.jsonl") for case in cases)
    tree.put(f"{base}/merged/repair_attempts.jsonl", merged_attempts)
    tree.put(f"{base}/merged/repair_candidates.jsonl", merged_candidates)
    return cases


# what the damaged case's escaping episode path names (relative to sample_runs/)
ESCAPE_TARGET = "inputs/feedback-converged-3-rounds/private-context.json"


def damaged(tree: Tree) -> Case:
    """A 2-round converged search, then damaged the ways a crash, a bad copy or a hand edit would."""
    c = _new_case(tree, "damaged", PROTEST, "case-rally-tbilisi-0999")
    c.json("inputs/semantic-verification.json", _loc(c, 2, "incomplete_event_verification", "input")["doc"])
    sb = SearchBuilder(c)
    _round(sb, 0, semantic_input_rel="inputs/semantic-verification.json", copy_from="inputs/semantic-verification.json",
           hints=[H_PROTEST_0],
           verdict=judgement(anchor_ok=False, repaired=False, earliest=1, why="The error is at step 1."))
    fb = sb.feedback()
    rb1 = _round(sb, 1, semantic_input_rel="rounds/round-00/semantic-localization.json",
                 loc=_loc(c, 1, "wrong_search_direction", "relocalize-1", previous=fb["anchor_feedback"]),
                 hints=[H_PROTEST_1], verdict=judgement(earliest=1, why="Opened the oldest copy at the anchor."))
    sb.finish("converged", gzip_state=True)
    f = tree.files
    p = c.tp
    image = f"rounds/round-01/media/{c.image_sha}.image"
    # json_invalid (+ file_hash_mismatch vs search-state): the round manifest cut mid-write
    data = f[p("rounds/round-00/manifest.json")]
    f[p("rounds/round-00/manifest.json")] = data[: len(data) // 2]
    # jsonl_torn_line: the root aggregate cut inside its second row (no trailing newline)
    data = f[p("repair_attempts.jsonl")]
    first_end = data.index(b"\n") + 1
    f[p("repair_attempts.jsonl")] = data[: first_end + (len(data) - first_end) // 3]
    # bound_hash_mismatch: the round-01 request edited by hand, payload_sha256 left as it was
    doc = json.loads(f[p("requests/round-01.json")])
    doc["payload"]["needs_relocalization"] = False
    f[p("requests/round-01.json")] = pretty_json_bytes(doc)
    # file_hash_mismatch: the accepted teacher episode edited after the fact
    ep = json.loads(f[p("rounds/round-01/episodes/hint-00-teacher.json")])
    ep["verdict"] = "real"
    f[p("rounds/round-01/episodes/hint-00-teacher.json")] = pretty_json_bytes(ep)
    # missing_artifact: the round-00 teacher episode is gone
    del f[p("rounds/round-00/episodes/hint-00-teacher.json")]
    # path_outside_root: the round-00 record points its episode outside the case, at a
    # file that exists (another case's privileged private context, beside the roots): a
    # written path may never leave the root, whatever it names
    rows = [json.loads(line) for line in f[p("rounds/round-00/repair_attempts.jsonl")].splitlines()]
    rows[0]["continuation"]["hinted_teacher_episode_trace"] = f"../../../{ESCAPE_TARGET}"
    f[p("rounds/round-00/repair_attempts.jsonl")] = canonical_jsonl_bytes(rows)
    # leftover_tmp: an interrupted atomic write of the search manifest
    f[p("manifest.json.tmp")] = f[p("manifest.json")][:200]
    # schema_unknown: a local verification written by a newer verifier
    jv = json.loads(f[p("rounds/round-01/judge/hint-00.json")])
    jv["schema_version"] = "ifv-psd-local-verification-v9"
    f[p("rounds/round-01/judge/hint-00.json")] = pretty_json_bytes(jv)
    # media_mismatch: the image bytes no longer match the sha256 in their name / psd_media
    img = bytearray(f[p(image)])
    img[-20] ^= 0xFF
    f[p(image)] = bytes(img)
    del rb1
    return c


def damaged_unreadable(tree: Tree) -> Case:
    """A single run whose manifest.json was cut by a crash (status ``unreadable``)."""
    c = _new_case(tree, "damaged-unreadable-manifest", PROTEST, "case-rally-tbilisi-1001")
    c.json("inputs/semantic-verification.json", _loc(c, 1, "wrong_search_direction", "input")["doc"])
    rb = RunBuilder(c, "", hint_count=1)
    rb.begin(copy_from="inputs/semantic-verification.json")
    rb.propose([H_PROTEST_1])
    rb.live_check()
    data = c.get("manifest.json")
    c.put("manifest.json", data[: len(data) * 2 // 3])
    return c


def slate_unsupported(tree: Tree, base: str = "slate-unsupported") -> None:
    """A ``--search-mode slate`` root: recognised and labelled unsupported (no case files read).

    Not part of sample_runs (other tests expect every sample to be a loadable
    search or run); written by ``synthetic.make_slate_case``."""
    fake = f"{tree.base}/{base}"
    tree.bound(
        f"{base}/slate-state.json",
        {"version": "ifv-psd-slate-search-v1", "inputs": {"output_dir": fake, "search_mode": "slate"}, "slate_review_policy": "observed-slate-positions-v2"},
        {"status": "searching", "elapsed_seconds": 640.0, "rounds": [{"directory": f"{fake}/slate-rounds/00", "slate_size": 4}]},
    )
    tree.json(f"{base}/slate-rounds/00/review.json", {"schema_version": "ifv-psd-slate-review-v1", "positions": [0, 1, 2, 3], "accepted": []})
    tree.json(f"{base}/slate-rounds/00/infrastructure-attempts/result.json", {"status": "ok", "attempts": 4})
    tree.json(f"{base}/pre-checker-feedback-00.json", {"round": 0, "notes": ["slate position 2 repeats a completed hint"]})
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=1, fileobj=buf, mtime=0) as gz:
        gz.write(canonical_jsonl_bytes([{"schema_version": "ifv-psd-repair-attempt-v1", "attempt_id": "psd-repair-hint:slate-0", "accepted": False,
                                         "local_verification": {}}]))
    tree.put(f"{base}/repair_attempts.jsonl.gz", buf.getvalue())


README = """# sample_runs

Generated by `python -m eviscene_tui.scaffold.samples sample_runs` (deterministic; do not edit by hand:
`tests/scaffold/samples/test_samples_regenerate.py` checks the committed bytes). What
`eviscene-tui check sample_runs --json` must report per case is in `eviscene_tui/scaffold/samples/expected.py`.

- Laid out as the EviScene driver leaves a run and then copied off the cluster: each case
  folder was written at `/data/eviscene/sample_runs/<case folder>` and every absolute path
  the driver recorded names that location. None of it exists here, so the app reads every
  case through its moved-tree rules (`eviscene_tui/artifacts/paths.py`): `/data/eviscene`
  is looked for where `sample_runs/`'s parent is.
- The driver's inputs are NOT inside the case folders (the driver never copies them): they
  sit beside them in `inputs/<case>/` (`trace.json` with the source rollout's runtime
  archive `runtime/` next to it, candidate, audit, gold, public/private context, image,
  serving profile, semantic verification, source-access policy; `gold.json` and
  `private-context.json` are privileged). `inputs/` is not a case.
- Runtime store paths are absolute, except in the two legacy-runtime cases
  (`search-paused-execution-error`, `single-generating`): relative to the working
  directory of the process that wrote them (`/data/eviscene/sample_runs` for the source
  rollout, `/data/eviscene` for the driver).
- Serving profile: `serving-profile.json` (profile_id `ifv-qwen3.5-9b`); each case binds a copy
  in its inputs.
- Tokens: Qwen3.5 ids from the tiny tokenizer (`eviscene_tui/scaffold/tiny.py`); one 128x96 PNG per
  case = grid_thw [1, 6, 8], patch 16, merge 2 -> 12 `<|image_pad|>` (248056) framed by
  248053/248054; completion logprobs with top-3 alternatives (top-k kept small for size); the
  teacher prompt is the student prompt plus one inserted user message `Hint: ...` right before
  the generation prompt.
- Continuations are mostly in the gzip pointer form (real ones exceed the 1 MiB threshold; here
  the form is forced); `feedback-converged-3-rounds/rounds/round-01` keeps a plain one.

| folder | what |
|---|---|
| feedback-converged-3-rounds | anchor mismatch -> relocalized (hint locked) -> accepted; round-01 continuation plain, others gzip pointer form |
| search-no-recoverable-site | round-00 `no_recoverable_site` -> `no_further_grounded_hint` |
| search-paused-pending-verifier | round-00 pending (judge ReadTimeout): local_verification {} |
| search-paused-execution-error | teacher token capture incomplete -> `paused_execution_error`; legacy `stage_name` trace, relative runtime paths |
| single-no-admissible-hints | five audit rejection codes, no attempts |
| single-generating | hint-00 pending, stale generation-last-error, hint-01 mid-write; legacy `stage_name` trace, relative runtime paths |
| single-copied-without-inputs | a finished run copied WITHOUT its inputs: one `missing_artifact` per input, the run's own files still show |
| hostile-strings | ANSI CSI/OSC, markup, bidi overrides in trace, hint and judge text |
| multi-case | canary wrapper: converged (psd_media v1) + attempt_budget_exhausted |
| damaged | every integrity problem code except token/unsupported; round-00's record points its episode at another case's `private-context.json` beside it (refused: `path_outside_root`) |
| damaged-unreadable-manifest | single run whose manifest.json is truncated |
"""


def build_all(base: str | None = None) -> Tree:
    """Every sample case; ``base``: the absolute location the tree is recorded as written
    at (default the fictitious ``/data/eviscene/sample_runs``)."""
    tree = Tree(base)
    tree.put("README.md", README.encode("utf-8"))
    tree.json("serving-profile.json", serving_profile())
    feedback_converged(tree)
    search_no_recoverable_site(tree)
    search_paused_pending(tree)
    search_paused_execution_error(tree)
    single_no_admissible(tree)
    single_generating(tree)
    hostile_strings(tree)
    copied_without_inputs(tree)
    multi_case(tree)
    damaged(tree)
    damaged_unreadable(tree)
    return tree
