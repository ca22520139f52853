"""View models of an open case, built in a worker from a ``CaseBundle``.

Everything here is display-ready: each run-derived string has passed
``safe_text``. Documents are lists of lines of :class:`Seg` (text + a semantic
style name + a ``privileged`` flag); the UI maps style names to theme colours and
masks privileged segments until the operator reveals them. No Textual import.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from eviscene_tui.artifacts.models import (
    CHECK_NAMES,
    SEMANTIC_CATEGORIES,
    AttemptRecord,
    ContinuationPayload,
    FailureSite,
    FeedbackObject,
    LocalVerification,
    SearchManifest,
    SemanticLocalization,
)
from eviscene_tui.safe_text import safe_text
from eviscene_tui.artifacts.jsonio import read_json
from eviscene_tui.journal.records import record_key
from eviscene_tui.state.triage import localizer_reasons
from eviscene_tui.state.claims import Claim, ClaimResult, claim_line_parts, claims_summary, explanation_claims

if TYPE_CHECKING:
    from pathlib import Path

    from eviscene_tui.journal.records import RecordKey

    from eviscene_tui.artifacts.case import CaseBundle, RoundBundle
    from eviscene_tui.artifacts.paths import InputProvenance
    from eviscene_tui.artifacts.trace import SourceTrace

PASS_FLAGS = ("source_rollout_failed", "hinted_local_pass", "hinted_episode_pass", "hinted_strict_trace_audit_pass")
KNOWN_CATEGORIES = frozenset(SEMANTIC_CATEGORIES)
REJECTION_TYPES = frozenset({"format_error", "output_rejected", "policy_replan"})


@dataclass(frozen=True, slots=True)
class Seg:
    text: str
    style: str = ""  # title, key, value, ok, bad, warn, dim, hint, quote, mark, accent
    privileged: bool = False


Line = tuple[Seg, ...]


def S(value: Any, style: str = "", *, privileged: bool = False, single_line: bool = True, limit: int | None = 2000) -> Seg:
    return Seg(safe_text(value, single_line=single_line, limit=limit), style, privileged)


def L(*segs: Seg | str) -> Line:
    return tuple(s if isinstance(s, Seg) else Seg(s) for s in segs)


def kv(key: str, value: Any, style: str = "value", *, privileged: bool = False) -> Line:
    shown = "-" if value is None or value == "" else value
    return L(Seg(f"  {key}: ", "key"), S(shown, style, privileged=privileged))


def block(text: Any, style: str = "", *, indent: str = "    ", privileged: bool = False, limit: int = 20000) -> list[Line]:
    """Multi-line text, one Line per line (sanitised, control pictures kept visible)."""
    raw = text if isinstance(text, str) else _json_text(text)
    safe = safe_text(raw, limit=limit)
    return [L(Seg(indent), Seg(part, style, privileged)) for part in safe.split("\n")] or [L(Seg(indent))]


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode("utf-8", "replace")
    except (TypeError, orjson.JSONEncodeError):
        return repr(value)


def flag(value: Any) -> Seg:
    if value is True:
        return Seg("\u2713", "ok")
    if value is False:
        return Seg("\u2717", "bad")
    return Seg("?", "dim")


@dataclass(frozen=True, slots=True)
class Quote:
    step_index: int | None
    text: str  # safe, single line
    candidate: int
    category: str


@dataclass
class CaseView:
    key: str
    title: str
    status: str
    layout: str
    failure_index: int | None = None
    site_step_id: str | None = None
    site_from_semantic: bool = False  # failure_index taken from semantic-localization.json (not yet bound)
    no_site: bool = False
    closest_step: int | None = None
    localization: list[Line] = field(default_factory=list)
    quotes: list[Quote] = field(default_factory=list)
    rounds: list[Line] = field(default_factory=list)
    # line index in ``rounds`` -> the files (case-relative, "/" separated) the object on
    # that line is read from; a path ending in "/" stands for everything under it
    round_anchors: dict[int, tuple[str, ...]] = field(default_factory=dict)
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    latest_round: int | None = None
    latest_hint: str | None = None  # raw hint text for the stream screen (not displayed from here)
    hint_count: int = 0
    fingerprint: tuple[Any, ...] = ()
    # where each bound input was found (artifacts.paths): InputProvenance rows, sha256
    # not verified yet (the integrity check verifies them)
    provenance: list[InputProvenance] = field(default_factory=list)
    #: what the case's labels, searches and records are keyed by (journal.records)
    record: RecordKey | None = None
    case_id: str = ""  # from the ledgers, else the bound candidate.json
    candidate_id: str = ""
    #: the localizer explanation's quotes and named events, to check against the trace (state.claims)
    claims: list[Claim] = field(default_factory=list)
    claims_at: int | None = None  # the line of ``localization`` the checked claims are shown before


# ----------------------------------------------------------------------------- helpers
def _rel(path: Any, base: Any) -> str:
    try:
        return os.path.relpath(str(path), str(base))
    except ValueError:
        return str(path)


def _short(sha: Any, n: int = 12) -> str:
    return sha[:n] + "\u2026" if isinstance(sha, str) and len(sha) > n else (sha or "")


def _semantic(bundle: CaseBundle) -> tuple[SemanticLocalization | None, RoundBundle | None]:
    """(semantic localization, the round it came from) — newest round that has one."""
    for r in reversed(bundle.rounds):
        sl = r.semantic_localization
        if sl is not None:
            return sl, r
    return None, None


def _source_failed(bundle: CaseBundle) -> bool | None:
    for a in reversed(bundle.attempts or []):
        if a.source_rollout_failed is not None:
            return a.source_rollout_failed
        if a.verification is not None and a.verification.source_rollout_failed is not None:
            return a.verification.source_rollout_failed
    return None


def semantic_validity(sl: SemanticLocalization | None, trace_sha: str | None = None) -> list[str]:
    """Why a semantic localization cannot yield a site (§3.4 rule 3); [] = valid. The one
    rule of ``state.triage.localizer_reasons`` (whose codes the runs table shows)."""
    raw = sl.model_dump(mode="python") if sl is not None else None
    return [message for _code, message in localizer_reasons(raw, trace_sha)]


# ----------------------------------------------------------------------------- build
def failure_index_for(bundle: CaseBundle) -> int | None:
    """The source step of the current failure site: the bound site, else the step a
    valid semantic localization selects (§3.4 rule 3). None when there is none."""
    site = bundle.failure_site()
    if site is not None:
        return site.source_step_index
    sl, _ = _semantic(bundle)
    if sl is not None and not semantic_validity(sl):
        chosen = sl.selected_candidate()
        if chosen is not None:
            return chosen.source_step_index
    return None


def build_case_view(bundle: CaseBundle, *, key: str, base: Any = None) -> CaseView:
    """Everything the case screen shows except the trace rows (built separately)."""
    base = base if base is not None else bundle.root
    site = bundle.failure_site()
    status = bundle.status
    view = CaseView(
        key=safe_text(key, single_line=True),
        title=safe_text(key if not bundle.case_id or bundle.case_id == key else f"{key} \u00b7 {bundle.case_id}", single_line=True, limit=100),
        status=safe_text(status, single_line=True),
        layout=safe_text(bundle.layout, single_line=True),
    )
    rounds = bundle.rounds
    view.latest_round = rounds[-1].index if rounds else None
    latest_round_status = rounds[-1].status if rounds else None
    if site is not None and site.source_step_index is not None:
        view.failure_index = site.source_step_index
        view.site_step_id = site.step_id
    elif site is None:
        # no bound site yet: a valid semantic localization names one (§3.4 rule 3)
        sl, _ = _semantic(bundle)
        if sl is not None and not semantic_validity(sl):
            chosen = sl.selected_candidate()
            if chosen is not None and chosen.source_step_index is not None:
                view.failure_index = chosen.source_step_index
                view.site_from_semantic = True
    view.no_site = status == "no_recoverable_site" or latest_round_status == "no_recoverable_site" or (
        site is None and status in ("no_further_grounded_hint",)
    )
    attempts = bundle.attempts or []
    for a in reversed(attempts):
        if a.hint_text:
            view.latest_hint = a.hint_text
            break
    view.hint_count = len(attempts)
    view.record = record_key(bundle.root, str(bundle.layout))
    view.case_id, view.candidate_id = _case_ids(bundle)
    if view.case_id and view.case_id != view.key:  # a no-site case is named by its bound candidate
        view.title = safe_text(f"{key} \u00b7 {view.case_id}", single_line=True, limit=100)
    if str(bundle.layout) == "slate":
        return _slate_view(bundle, view, base)
    view.claims = explanation_claims(_semantic(bundle)[0])
    view.localization = _localization_doc(bundle, site, view)
    view.rounds, view.round_anchors = _rounds_doc(bundle)
    view.provenance = bundle.input_provenance()
    view.problems = [(str(p.code), _rel(p.path, base), safe_text(p.message, single_line=True, limit=500)) for p in bundle.problems]
    return view


def _case_ids(bundle: CaseBundle) -> tuple[str, str]:
    """(case id, candidate id): the ledgers', else the bound candidate's."""
    case_id = bundle.case_id or ""
    candidate_id = next((c.candidate_id for c in bundle.candidates if c.candidate_id), None) or ""
    if not case_id or not candidate_id:
        doc = bound_candidate_doc(bundle) or {}
        case_id = case_id or (doc.get("case_id") if isinstance(doc.get("case_id"), str) else "") or ""
        candidate_id = candidate_id or (doc.get("candidate_id") if isinstance(doc.get("candidate_id"), str) else "") or ""
    return safe_text(case_id, single_line=True), safe_text(candidate_id, single_line=True)


def _slate_view(bundle: CaseBundle, view: CaseView, base: Any) -> CaseView:
    """A slate root: labelled as the unsupported layout it is everywhere, with what can
    be shown without reading the layout (its own status and the files it holds)."""
    slate = bundle.slate_state
    own = slate.get("status") if isinstance(slate, dict) and isinstance(slate.get("status"), str) else None
    view.status = safe_text(f"unsupported layout (slate: {own})" if own else "unsupported layout (slate)", single_line=True)
    note = L(Seg("This is a slate search root (--search-mode slate). eviscene-tui does not read this layout: "
                 "there is no localized failure step or source trace to show.", "warn"))
    view.localization = [L(Seg("Slate search: unsupported layout", "title")), note]
    lines: list[Line] = [L(Seg("Slate search ", "title"), S(own or "(no readable slate-state.json status)", "accent"), Seg("  unsupported layout", "bad"))]
    rounds_dir = bundle.root / "slate-rounds"
    try:
        names = sorted(p.name for p in rounds_dir.iterdir() if p.is_dir())
    except OSError:
        names = []
    lines.append(L(Seg(f"  slate rounds: {len(names)}", "key")))
    for name in names[:200]:
        lines.append(L(Seg("    "), S(f"slate-rounds/{name}/", "dim")))
    try:
        top = sorted(p.name + ("/" if p.is_dir() else "") for p in bundle.root.iterdir())
    except OSError:
        top = []
    lines.append(L(Seg("  files in the root:", "key")))
    for name in top[:200]:
        lines.append(L(Seg("    "), S(name, "dim")))
    view.rounds = lines
    view.round_anchors = {0: ("",)}
    view.problems = [(str(p.code), _rel(p.path, base), safe_text(p.message, single_line=True, limit=500)) for p in bundle.problems]
    return view


PROVENANCE_TITLE = "Inputs (read where the driver left them; written files must stay inside the run root)"


def provenance_lines(rows: list[InputProvenance]) -> list[Line]:
    """The Integrity tab's "Inputs" section: one line per bound input and where it was
    found (rule, inside/outside the run root, sha256 status); recorded paths shown
    sanitised."""
    out: list[Line] = [L(Seg(PROVENANCE_TITLE, "title"))]
    if not rows:
        out.append(L(Seg("  no bound inputs recorded", "dim")))
    for row in rows:
        style = "bad" if row.found is None or row.sha_status == "mismatch" else ("ok" if row.sha_status == "verified" else "")
        out.append(L(Seg("  "), S(row.line(), style, limit=600)))
    out.append(L(Seg("")))
    return out


def _localization_doc(bundle: CaseBundle, site: FailureSite | None, view: CaseView) -> list[Line]:
    out: list[Line] = []
    sl, sl_round = _semantic(bundle)
    candidate = bound_candidate_doc(bundle)
    if view.no_site:
        # a no-site case opens on this tab: why there is no site comes first (an 80x24
        # terminal shows it without scrolling)
        out.extend(_no_site_doc(bundle, sl, view, candidate))
        out.append(L())
    out.append(L(Seg("Failure site", "title")))
    if site is None and view.site_from_semantic:
        out.append(L(Seg("  not bound yet; the semantic localization selects ", "warn"), S(f"step {view.failure_index}", "accent")))
    elif site is None:
        out.append(L(Seg("  no failure site is known for this case", "bad")))
    else:
        out.append(kv("step id", site.step_id))
        out.append(kv("stage", site.stage))
        out.append(kv("source_step_index", site.source_step_index, "accent"))
        out.append(kv("localization kind", site.localization_kind))
        out.append(kv("semantic category", site.semantic_category))
        out.append(kv("verifier", site.localization_verifier))
        out.append(kv("from", site.origin, "dim"))
    out.append(L())
    out.extend(_source_rollout_lines(bundle, candidate))
    out.append(L())
    title = "Semantic localization"
    if sl_round is not None and sl_round.kind == "search_round":
        title += f" (round-{sl_round.index:02d})"
    out.append(L(Seg(title, "title")))
    if sl is None:
        out.append(L(Seg("  none (no semantic-localization.json in any round)", "dim")))
    else:
        out.extend(_semantic_lines(sl, view))
    if not view.no_site and view.claims:
        view.claims_at = len(out)  # the checked claims go here (state.claims; painted when the trace is searched)
    out.extend(_private_lines(bundle))
    return out


def _source_rollout_lines(bundle: CaseBundle, candidate: dict[str, Any] | None) -> list[Line]:
    """The source rollout's failure: from the attempts, else from the bound candidate
    (a repair seed exists only for a rollout that failed)."""
    out: list[Line] = [L(Seg("Source rollout", "title"))]
    failed = _source_failed(bundle)
    loc = _dict(candidate.get("failure_localization")) if candidate else {}
    if failed is None and candidate is not None:
        status = loc.get("status") or candidate.get("candidate_status") or "repair seed"
        out.append(L(Seg("  failure status: ", "key"), S("failed", "bad"), S(f"  (the bound candidate records {status})", "dim")))
    else:
        out.append(L(Seg("  failure status: ", "key"), Seg("failed" if failed else ("not explicitly failed" if failed is False else "unknown"), "bad" if failed else "warn")))
    cands = bundle.candidates or []
    if cands:
        c = cands[-1]
        out.append(kv("repair signal", c.repair_signal))
        if c.strict_trace_audit_failure_codes:
            out.append(kv("strict audit failure codes", ", ".join(map(str, c.strict_trace_audit_failure_codes)), "bad"))
        if c.failure_localization is not None:
            out.append(kv("localization status", c.failure_localization.status))
    elif candidate is not None:
        out.append(kv("repair signal", candidate.get("repair_signal")))
    return out


def _semantic_lines(sl: SemanticLocalization, view: CaseView) -> list[Line]:
    out: list[Line] = [L(Seg("  passed: ", "key"), flag(sl.passed), Seg(f"   {len(sl.candidates)} candidate(s)", "dim"))]
    out.append(L(Seg("  explanation (localizer):", "key")))
    out.extend(block(sl.explanation or "-", privileged=True))
    for i, cand in enumerate(sl.candidates):
        out.append(
            L(
                Seg(f"  candidate {i}: ", "key"),
                S(f"step {cand.source_step_index}", "accent"),
                Seg("  selected " if cand.selected else "  ", "ok" if cand.selected else ""),
                Seg("recoverable " if cand.recoverable else "not recoverable ", "ok" if cand.recoverable else "warn"),
                S(cand.category or "-", "value"),
                S("  " + (cand.verifier.label() if cand.verifier is not None else ""), "dim"),
            )
        )
        out.append(L(Seg("    explanation: ", "key")))
        out.extend(block(cand.explanation or "-", indent="      ", privileged=True))
        for basis in cand.observed_basis:
            step = basis.step_index if basis.step_index is not None else cand.source_step_index
            text = safe_text(basis.quote or "", single_line=True, limit=300)
            view.quotes.append(Quote(step, text, i, safe_text(cand.category or "", single_line=True)))
        if cand.observed_basis:
            out.append(L(Seg(f"    {len(cand.observed_basis)} observed_basis quote(s) — listed below; Enter jumps to the step", "dim")))
    return out


def _private_lines(bundle: CaseBundle) -> list[Line]:
    private = bundle.private_context
    gold = _gold(bundle)
    if private is None and gold is None:
        return []
    out: list[Line] = [L(), L(Seg("Private inputs", "title"))]
    if gold is not None:
        out.append(L(Seg("  gold:", "key")))
        out.extend(block(gold, privileged=True, limit=4000))
    if private is not None:
        out.append(L(Seg("  private context:", "key")))
        out.extend(block(private, privileged=True, limit=4000))
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def bound_candidate_doc(bundle: CaseBundle) -> dict[str, Any] | None:
    """The candidate.json the case binds (the wrapper's case-inputs copy first), as read."""
    try:
        path = bundle.input_path("candidate")
        if path is None:
            return None
        raw, _ = read_json(path)
    except Exception:  # noqa: BLE001 - a view never raises
        return None
    return raw if isinstance(raw, dict) else None


def _gold(bundle: CaseBundle) -> Any:
    try:
        path = bundle.input_path("gold")  # bound input, or the wrapper's case-inputs copy
        if path is None:
            return None

        raw, _ = read_json(path)
        return raw
    except Exception:  # noqa: BLE001 - a view never raises
        return None


def _observed_failure(loc: dict[str, Any]) -> list[tuple[str, Any]]:
    """The candidate's ``observed_failure_*_indices`` (and anchor) fields, as recorded."""
    out = []
    for key in sorted(loc):
        if key.startswith("observed_failure_") or key.startswith("repair_anchor_"):
            value = loc[key]
            if value not in (None, [], ""):
                out.append((key, ", ".join(map(str, value)) if isinstance(value, list) else value))
    return out


def _candidate_lines(candidate: dict[str, Any] | None) -> list[Line]:
    """What the bound candidate says about the failure: its basis and observed step."""
    if candidate is None:
        return [L(Seg("  \u2022 the bound candidate (candidate.json) is not available", "dim"))]
    loc = _dict(candidate.get("failure_localization"))
    out = [L(Seg("  \u2022 the candidate: ", "key"), S(candidate.get("case_id") or "-", "value"), Seg("  ", ""),
             S(_short(candidate.get("candidate_id"), 28) or "-", "dim"))]
    out.append(L(Seg("      failure basis: ", "key"), S(loc.get("basis") or candidate.get("repair_signal") or "not recorded", "accent"),
                 Seg("   status: ", "key"), S(loc.get("status") or candidate.get("candidate_status") or "-", "value")))
    observed = _observed_failure(loc)
    for key, value in observed:
        label = "observed failure step" if key.startswith("observed_failure_") else key.replace("_", " ")
        out.append(L(Seg(f"      {label}: ", "key"), S(value, "accent"), S(f"  ({key})", "dim")))
    if not observed:
        out.append(L(Seg("      observed failure step: not recorded by the candidate", "dim")))
    return out


def _provenance_lines(sl: SemanticLocalization | None) -> list[Line]:
    """Which model localized, and the provenance it recorded (also with no candidates)."""
    if sl is None:
        return []
    prov = _dict(sl.provenance)
    binding = _dict(prov.get("request_binding"))
    models = {c.verifier.model for c in sl.candidates if c.verifier is not None and c.verifier.model}
    model = binding.get("model") or (sorted(models)[0] if models else None)
    out = [L(Seg("  \u2022 the localizer: ", "key"), S(model or "model not recorded", "value"),
             S(f"  {binding.get('version')}" if binding.get("version") else "", "dim"))]
    for key, value in (("interaction", prov.get("interaction_id")), ("response sha256", _short(prov.get("response_sha256"))),
                       ("prompt sha256", _short(binding.get("prompt_sha256"))), ("packet sha256", _short(binding.get("packet_sha256")))):
        if value:
            out.append(L(Seg(f"      {key}: ", "key"), S(value, "dim")))
    route = prov.get("model_route")
    if route:
        out.append(L(Seg("      model route: ", "key"), S(_compact(route), "dim", limit=200)))
    if not prov:
        out.append(L(Seg("      no provenance recorded", "warn")))
    return out


def _no_site_doc(bundle: CaseBundle, sl: SemanticLocalization | None, view: CaseView, candidate: dict[str, Any] | None) -> list[Line]:
    out: list[Line] = [L(Seg("Why no recoverable site was found", "title"))]
    out.extend(_candidate_lines(candidate))
    cands = bundle.candidates or []
    audit_codes = [code for c in cands for code in (c.strict_trace_audit_failure_codes or [])]
    if audit_codes:
        out.append(L(Seg("  \u2022 strict audit failures: ", "key"), S(", ".join(audit_codes), "warn")))
    else:
        out.append(L(Seg("  \u2022 no strict-audit failure names a step (all_steps[N])", "value")))
    rejections = None
    try:
        trace, _ = bundle.trace()
        rejections = protocol_rejections(trace) if trace is not None else None
    except Exception:  # noqa: BLE001 - shown as "unknown (source trace unavailable)"
        rejections = None
    if rejections is None:
        out.append(L(Seg("  \u2022 protocol rejections: unknown (source trace unavailable)", "dim")))
    elif rejections:
        out.append(L(Seg("  \u2022 protocol rejections at steps: ", "key"), S(", ".join(map(str, rejections[:20])), "warn")))
    else:
        out.append(L(Seg("  \u2022 no protocol rejection (format_error / output_rejected / policy_replan) in the trace", "value")))
    reasons = semantic_validity(sl)
    if sl is None:
        out.append(L(Seg("  \u2022 semantic localization: missing", "bad")))
    elif sl.passed is not True:
        out.append(L(Seg("  \u2022 semantic localization: failed / not passed", "bad")))
    else:
        out.append(L(Seg("  \u2022 semantic localization: not usable", "bad")))
    for reason in reasons:
        out.append(L(Seg("      - "), S(reason, "warn")))
    out.extend(_provenance_lines(sl))
    if sl is not None:
        out.append(L(Seg("    localizer explanation:", "key")))
        out.extend(block(sl.explanation or "-", indent="      ", privileged=True))
    view.claims_at = len(out)  # the explanation's quotes and named events, checked against the trace, go here
    closest = closest_step(sl)
    view.closest_step = closest
    if closest is not None:
        out.append(L(Seg("  \u2022 the localizer came closest at ", "key"), S(f"step {closest}", "accent"), Seg("  (press f to go there)", "dim")))
    else:
        out.append(L(Seg("  \u2022 the localizer named no step", "dim")))
    return out


def claims_lines(results: list[ClaimResult] | None, claims: list[Claim]) -> list[Line]:
    """The checked claims of the localizer (state.claims): a summary anyone may see, the
    quotes themselves masked like the explanation they come from."""
    if not claims:
        return []
    if results is None:
        return [L(Seg("  \u2022 the localizer's quotes and named events: ", "key"), Seg("checking them against the trace\u2026", "dim"))]
    missing = any(not r.found for r in results)
    out = [L(Seg("  \u2022 the localizer's quotes and named events: ", "key"), S(claims_summary(results), "bad" if missing else "ok"))]
    for result in results:
        mark, what, where = claim_line_parts(result)
        out.append(L(Seg(f"      {mark} ", "bad" if not result.found else "ok"), Seg(what, "quote", True),
                     S(f"  ({result.claim.source}) ", "dim"), Seg(where, "bad" if not result.found else "dim")))
    return out


def closest_step(sl: SemanticLocalization | None) -> int | None:
    """The step the localizer came closest to: the selected candidate, else the
    recoverable candidate with the most quotes, else any candidate, else a quoted step."""
    if sl is None or not sl.candidates:
        return None
    cands = list(sl.candidates)
    for c in cands:
        if c.selected and c.source_step_index is not None:
            return c.source_step_index
    ranked = sorted(
        (c for c in cands if c.source_step_index is not None),
        key=lambda c: (not c.recoverable, -len(c.observed_basis)),
    )
    if ranked:
        return ranked[0].source_step_index
    for c in cands:
        for b in c.observed_basis:
            if b.step_index is not None:
                return b.step_index
    return None


def _checker_line(checker: dict[str, Any]) -> Line:
    segs: list[Seg] = [Seg("    checks: ", "key")]
    for name in CHECK_NAMES:
        segs.append(flag(checker.get(name)))
        segs.append(Seg(f" {name}  ", "dim"))
    return tuple(segs)


def _rounds_doc(bundle: CaseBundle) -> tuple[list[Line], dict[int, tuple[str, ...]]]:
    out: list[Line] = []
    anchors: dict[int, tuple[str, ...]] = {}
    manifest = bundle.manifest
    if bundle.is_search:
        head = [Seg("Search ", "title"), S(bundle.status, "accent")]
        ee = manifest.execution_error if isinstance(manifest, SearchManifest) else None
        if ee is not None:
            head.append(S(f"   execution error in round {ee.round}: {ee.type}", "bad"))
        anchors[len(out)] = SEARCH_FILES
        out.append(tuple(head))
    for r in bundle.rounds:
        lines, local = _round_doc(bundle, r)
        anchors.update({len(out) + i: paths for i, paths in local.items()})
        out.extend(lines)
    for index in bundle.pending_round_indices() if bundle.is_search else []:
        out.append(L())
        out.append(L(S(f"Round {index:02d}", "title"), Seg("  inputs written; the round has not started (no rounds/round-NN yet)", "warn")))
        fb = bundle.feedback_for(index)
        if fb is not None:
            out.extend(_feedback_lines(fb))
    if not out:
        out.append(L(Seg("No rounds.", "dim")))
    return out, anchors


# files of a search root shown on the "Search" line (the round directories have their own lines)
SEARCH_FILES = ("manifest.json", "search-state.json", "repair_attempts.jsonl", "repair_candidates.jsonl", "requests/", "case-inputs/", "inputs/", "")


def _feedback_lines(fb: FeedbackObject) -> list[Line]:
    out: list[Line] = [L(Seg("  feedback given to this round", "key"))]
    out.append(L(Seg("    locked_hint: ", "key"), S(fb.locked_hint or "(none)", "hint" if fb.locked_hint else "dim", single_line=False)))
    out.append(L(Seg("    needs_relocalization: ", "key"), flag(fb.needs_relocalization)))
    out.append(L(Seg(f"    excluded_hints ({len(fb.excluded_hints)}):", "key")))
    for h in fb.excluded_hints:
        out.append(L(Seg("      - "), S(h, "hint", limit=300)))
    af = fb.anchor_feedback
    if af is not None and (af.selected_source_step is not None or af.earliest_error_step is not None):
        out.append(
            L(
                Seg("    anchor_feedback: ", "key"),
                S(f"selected step {af.selected_source_step}, earliest error step {af.earliest_error_step}", "value"),
            )
        )
        out.append(_checker_line(af.checker.values() if af.checker is not None else {}))
    out.append(L(Seg(f"    previous rounds: {len(fb.previous_rounds)}", "dim")))
    return out


def _round_doc(bundle: CaseBundle, r: RoundBundle) -> tuple[list[Line], dict[int, tuple[str, ...]]]:
    out: list[Line] = [L()]
    anchors: dict[int, tuple[str, ...]] = {}
    rd = f"rounds/round-{r.index:02d}/" if r.kind == "search_round" else ""
    status = r.status or "(no manifest yet)"
    # the round line carries the round's own files (and, for a search round, everything under it)
    anchors[len(out)] = (rd,) if rd else ("manifest.json", "repair_attempts.jsonl", "repair_candidates.jsonl")
    out.append(_round_head(r, status))
    fb = r.feedback
    if fb is not None:
        out.extend(_feedback_lines(fb))
    out.extend(_proposal_lines(r))
    _attempt_section(r, rd, out, anchors)
    media = _media_dir(r, rd)
    if media is not None:
        anchors[len(out)] = (media,)
        out.append(L(Seg("  media: ", "key"), S(media, "dim")))
    if r.kind == "search_round" and not (r.attempts or []) and status not in ("no_recoverable_site",):
        out.append(L(Seg("  no attempt in this round", "dim")))
    out.extend(_round_tail_lines(r))
    return out, anchors


def _round_head(r: RoundBundle, status: str) -> Line:
    """``Round NN  <status>  · <localization>  · site step N``."""
    label = f"Round {r.index:02d}" if r.kind == "search_round" else "Run"
    tone = "ok" if status == "generated" else ("bad" if status in ("no_recoverable_site", "no_admissible_hints") else "warn")
    loc = ""
    if r.kind == "search_round":
        loc = "initial localization" if r.index == 0 else ("relocalized" if r.relocalized else "localization reused")
    site_step = None
    for a in r.attempts or []:
        if a.repair_site is not None and a.repair_site.source_step_index is not None:
            site_step = a.repair_site.source_step_index
    if site_step is None:
        for c in r.candidates or []:
            if c.repair_site is not None and c.repair_site.source_step_index is not None:
                site_step = c.repair_site.source_step_index
    head = [S(label, "title"), Seg("  "), S(status, tone)]
    if loc:
        head += [Seg("  \u00b7 "), S(loc, "accent" if loc == "relocalized" else "dim")]
    if site_step is not None:
        head += [Seg("  \u00b7 site "), S(f"step {site_step}", "accent")]
    return tuple(head)


def _proposal_lines(r: RoundBundle) -> list[Line]:
    """The round's admitted proposals with their audits, then the rejected audit rows."""
    out: list[Line] = []
    proposals = r.proposals or []
    audits = r.proposer_audits or []
    if proposals or audits:
        out.append(L(Seg(f"  proposals ({len(proposals)} admitted, {len(audits)} audit rows)", "key")))
    for p in proposals:
        audit = p.audit
        passed = audit.passed if audit is not None else None
        errors = [str(e) for e in (audit.errors if audit is not None else [])]
        segs = [Seg("    "), flag(passed), Seg(" passed" if passed else " ", "ok" if passed else "bad")]
        if errors:
            segs.append(S(" " + ", ".join(errors), "bad"))
        segs.append(S(f"  level {p.level}", "dim"))
        sha = audit.hint_sha256 if audit is not None and getattr(audit, "hint_sha256", None) else None
        if sha:
            segs.append(S(f"  sha {_short(sha)}", "dim"))
        segs.append(S(f"  {p.provider or '-'}/{p.model or '-'}", "dim"))
        out.append(tuple(segs))
        out.extend(block(p.text or "", "hint", indent="      "))
    for row in audits:
        if row.passed:
            continue
        code = row.reason_code
        out.append(L(Seg("    "), flag(False), S(f" {code or 'hint_audit_failed'}", "bad"), Seg("  (rejected; hint text not stored)", "dim")))
    return out


def _attempt_section(r: RoundBundle, rd: str, out: list[Line], anchors: dict[int, tuple[str, ...]]) -> None:
    """The attempts (with judge and continuation), then the continuation payloads no
    attempt row stands for (a round that stopped between the continuation and its
    attempt record still shows them); appended to ``out`` with their file anchors."""
    judge = r.judge or {}
    conts = r.continuations or {}
    episodes = _episode_paths(r)
    for i, a in enumerate(r.attempts or []):
        episode = episodes.get(i) if episodes is not None else _UNKNOWN
        lines, local = _attempt_lines(i, a, judge.get(i), conts.get(i), rd=rd, episode=episode)
        anchors.update({len(out) + j: paths for j, paths in local.items()})
        out.extend(lines)
    for i in sorted(set(conts) - set(range(len(r.attempts or [])))):
        cont = conts[i]
        anchors[len(out)] = (f"{rd}continuations/hint-{i:02d}.json", f"{rd}episodes/hint-{i:02d}-teacher.json")
        out.append(
            L(
                Seg(f"  continuation hint-{i:02d} ", "key"),
                Seg("(no attempt row)  ", "dim"),
                S(f"{len(list(cont.teacher_steps))} step(s)", "value"),
                Seg("  stop_reason ", "key"),
                S(cont.stop_reason or "-", "value"),
            )
        )


def _round_tail_lines(r: RoundBundle) -> list[Line]:
    """The round's last generation error, finalization and judge errors."""
    out: list[Line] = []
    err = r.generation_last_error
    if err is not None:
        out.append(L(Seg("  generation-last-error: ", "key"), S(f"hint {err.hint_index} try {err.retry}: {err.error_type}", "warn"), Seg("  (may be stale)", "dim")))
    fin = r.finalization
    if fin is not None:
        out.append(L(Seg("  finalization: ", "key"), S(fin.status, "value")))
        for u in fin.unresolved or []:
            out.append(L(Seg("    unresolved: "), S(f"hint {u.hint_index}: {u.reason}", "warn")))
    js = r.judge_summary
    if js is not None:
        for e in js.errors or []:
            out.append(L(Seg("  judge error: ", "key"), S(f"hint {e.hint_index}: {e.error_type}", "bad")))
    return out


_UNKNOWN = object()  # the episode listing could not be read


def _episode_paths(r: RoundBundle) -> dict[int, Path] | None:
    """hint index -> episode file of a round; None when the folder cannot be listed."""
    try:
        return dict(r.episode_paths)
    except (OSError, ValueError):
        return None


def _media_dir(r: RoundBundle, rd: str) -> str | None:
    """The round's media folder when it has one (its files are checked against the attempts)."""
    try:
        return f"{rd}media/" if (r.dir / "media").is_dir() else None
    except OSError:
        return None


def _attempt_lines(
    i: int, a: AttemptRecord, lv: LocalVerification | None, cont: ContinuationPayload | None, *, rd: str = "", episode: Path | object | None = _UNKNOWN
) -> tuple[list[Line], dict[int, tuple[str, ...]]]:
    """The lines of one attempt (with its judge verdict and continuation); ``episode``: its
    episode file, None when it is missing, ``_UNKNOWN`` when the folder could not be listed."""
    out: list[Line] = []
    anchors: dict[int, tuple[str, ...]] = {}
    hint = f"hint-{i:02d}"
    anchors[0] = (f"{rd}judge/{hint}.json", f"{rd}hints/{hint}.json", f"{rd}verification/{hint}.json")
    state = a.state
    tone = {"accepted": "ok", "pending": "warn", "rejected": "bad"}[state]
    label = {"accepted": "ACCEPTED", "pending": "PENDING verification (not rejected)", "rejected": "REJECTED"}[state]
    out.append(L(Seg(f"  attempt hint-{i:02d}  ", "key"), Seg(f" {label} ", tone + "-badge"), S(f"  tier {a.repair_tier or '-'}", "value")))
    out.append(L(Seg("    hint:", "key")))
    out.extend(block(a.hint_text or "", "hint", indent="      "))
    hr = a.hint_record
    if hr is not None:
        sha = hr.audit.hint_sha256 if hr.audit is not None and getattr(hr.audit, "hint_sha256", None) else None
        out.append(L(S(f"      level {hr.level}  sha {_short(sha) or '-'}  {hr.provider or '-'}/{hr.model or '-'}", "dim")))
    segs: list[Seg] = [Seg("    passes: ", "key")]
    for name, value in a.pass_flags.items():
        segs += [flag(value), Seg(f" {name}  ", "dim")]
    out.append(tuple(segs))
    checker = lv.checker if lv is not None else a.checker
    out.append(_checker_line(checker))
    v = a.verification
    if v is not None:
        out.append(L(Seg("    recorded verdict: ", "key"), S(v.hinted_recorded_verdict, "value"), Seg("   expected verdict: ", "key"), S(v.expected_verdict or "-", "value", privileged=True)))
        if v.reasons:
            out.append(L(Seg("    verification reasons:", "key")))
            for reason in v.reasons:
                out.append(L(Seg("      - "), S(reason, "warn", limit=400)))
    if lv is not None and lv.review is not None:
        out.append(L(Seg("    judge explanation:", "key")))
        out.extend(block(lv.review.explanation or "-", indent="      ", privileged=True))
        if lv.review.earliest_error_step is not None:
            out.append(L(Seg("    earliest error step: ", "key"), S(lv.review.earliest_error_step, "accent")))
    c = a.continuation
    stop = c.stop_reason if c is not None else None
    steps = list(cont.teacher_steps) if cont is not None else []
    anchors[len(out)] = (f"{rd}continuations/{hint}.json", f"{rd}episodes/{hint}-teacher.json")
    recorded = c.teacher_step_count if c is not None else None
    # what is shown comes from the files that are there: the step count from the
    # continuation payload when it exists, and whether the episode file exists at all
    if cont is not None:
        count = S(f"{len(steps)} step(s)", "value")
    elif recorded:
        count = S(f"no continuation file (the attempt row records {recorded} step(s))", "warn")
    else:
        count = S("none recorded", "dim")
    line = [Seg("    teacher continuation: ", "key"), count]
    if episode is None and (cont is not None or recorded):
        line += [Seg("  episode ", "key"), Seg("file missing", "bad")]
    elif episode is not None and episode is not _UNKNOWN:
        line += [Seg("  episode ", "key"), S(f"episodes/{hint}-teacher.json", "dim")]
    line += [Seg("  stop_reason ", "key"), S(stop or (cont.stop_reason if cont is not None else None) or "-", "value")]
    out.append(tuple(line))
    for j, step in enumerate(steps[:50]):
        tool = safe_text(step.tool_name or "", single_line=True, limit=40)
        args = safe_text(_compact(step.tool_args), single_line=True, limit=120)
        text = step.output if step.output not in (None, "") else step.thought
        out.append(
            L(
                Seg(f"      {j:>2} "),
                S(step.stage or step.stage_name or "-", "dim"),
                Seg(" "),
                S(step.action_type or "-", "value"),
                Seg(" "),
                Seg(f"{tool}({args})" if tool else "", "accent"),
                Seg("  "),
                S(_compact(text), "", limit=160),
            )
        )
    if len(steps) > 50:
        out.append(L(Seg(f"      \u2026 {len(steps) - 50} more", "dim")))
    return out, anchors


def _compact(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return " ".join(value.split())
    try:
        return orjson.dumps(value, default=str).decode("utf-8", "replace")
    except (TypeError, orjson.JSONEncodeError):
        return str(value)


# ----------------------------------------------------------------------------- compare
COMPARE_FIELDS = ("thought", "action_type", "tool_name", "tool_args", "output")


def _field(step: Any, name: str) -> str:
    if step is None:
        return ""
    value = step.get(name) if isinstance(step, dict) else getattr(step, name, None)
    if name == "tool_args":
        return _compact(value)
    if value is None:
        return ""
    return value if isinstance(value, str) else _compact(value)


def _diff_segs(a: str, b: str) -> tuple[list[Seg], list[Seg]]:
    """Word-level diff: segments for the left and right texts with changes marked."""
    wa, wb = a.split(" "), b.split(" ")
    left: list[Seg] = []
    right: list[Seg] = []
    sm = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        ta = " ".join(wa[i1:i2])
        tb = " ".join(wb[j1:j2])
        if op == "equal":
            left.append(S(ta + " ", "", limit=4000))
            right.append(S(tb + " ", "", limit=4000))
        else:
            if ta:
                left.append(S(ta, "del", limit=4000))
                left.append(Seg(" "))
            if tb:
                right.append(S(tb, "ins", limit=4000))
                right.append(Seg(" "))
    return left, right


@dataclass
class CompareView:
    left_title: str
    right_title: str
    left: list[Line]
    right: list[Line]
    note: str = ""


def build_compare(source_step: Any, teacher_step: Any, *, source_index: int | None, teacher_label: str) -> CompareView:
    left: list[Line] = []
    right: list[Line] = []
    for name in COMPARE_FIELDS:
        a = _field(source_step, name)
        b = _field(teacher_step, name) if teacher_step is not None else ""
        same = a == b
        mark = Seg("  " if same else "\u2260 ", "dim" if same else "mark")
        left.append(L(mark, Seg(name, "key")))
        right.append(L(mark, Seg(name, "key")))
        if teacher_step is None:
            left.extend(block(a or "-", indent="    "))
            continue
        if same:
            left.extend(block(a or "-", "dim", indent="    "))
            right.extend(block(b or "-", "dim", indent="    "))
        elif len(a) + len(b) > 8000:
            left.extend(block(a or "-", "del", indent="    ", limit=4000))
            right.extend(block(b or "-", "ins", indent="    ", limit=4000))
        else:
            ls, rs = _diff_segs(" ".join(a.split()), " ".join(b.split()))
            left.append(tuple([Seg("    ")] + ls))
            right.append(tuple([Seg("    ")] + rs))
    if teacher_step is None:
        right.append(L(Seg("no teacher repaired step yet (no continuation or episode)", "dim")))
    return CompareView(
        left_title=f"source step {source_index}" if source_index is not None else "source step (unknown)",
        right_title=safe_text(teacher_label, single_line=True),
        left=left,
        right=right,
    )


def pick_teacher_step(bundle: CaseBundle, source_index: int | None) -> tuple[Any, str]:
    """The teacher's repaired step at the failure site: prefer an accepted attempt,
    else the newest; from the continuation's first teacher step, else the episode."""
    candidates: list[tuple[int, Any, int, Any]] = []
    for r in bundle.rounds:
        for i, a in enumerate(r.attempts or []):
            candidates.append((1 if a.state == "accepted" else 0, r, i, a))
    if not candidates:
        return None, "teacher repaired step"
    candidates.sort(key=lambda t: (t[0], t[1].index))
    _, r, i, a = candidates[-1]
    label = (f"round-{r.index:02d} " if r.kind == "search_round" else "") + f"hint-{i:02d} teacher step"
    cont = (r.continuations or {}).get(i)
    if cont is not None and cont.teacher_steps:
        return cont.teacher_steps[0], label
    episode, _ = r.episode(i)
    if episode is not None and source_index is not None and source_index < episode.step_count:
        return episode.step(source_index), label + " (episode)"
    return None, label


# ----------------------------------------------------------------------------- step detail
def step_detail_doc(detail: dict[str, Any], *, failure_index: int | None = None) -> list[Line]:
    """Full detail of one trace step (from ``SourceTrace.step_detail``)."""
    out: list[Line] = []
    index = detail.get("index")
    head = [Seg(f"Step {index}", "title")]
    if index is not None and index == failure_index:
        head.append(Seg("  FAILURE SITE", "bad-badge"))
    if detail.get("is_policy_step"):
        head.append(Seg("  policy step", "accent"))
    if detail.get("psd_role"):
        head.append(S(f"  role {detail.get('psd_role')}", "ok"))
    out.append(tuple(head))
    for name in ("stage", "round", "action_type", "tool_name", "context_request_id", "interaction_id", "function_call_id", "error_class"):
        if detail.get(name) not in (None, ""):
            out.append(kv(name, detail.get(name), "bad" if name == "action_type" and detail.get(name) in REJECTION_TYPES else "value"))
    if detail.get("rejection_reason") not in (None, ""):
        out.append(L(Seg("  rejection_reason:", "key")))
        out.extend(block(detail["rejection_reason"], "warn"))
    sections = (
        ("thought", detail.get("thought"), ""),
        ("tool_args", detail.get("tool_args_pretty"), ""),
        ("tool_result" + (" (JSON, pretty-printed)" if detail.get("tool_result_is_json") else ""), detail.get("tool_result_pretty"), ""),
        ("output", detail.get("output"), ""),
        ("policy_action", detail.get("policy_action_pretty"), ""),
        ("policy_input", detail.get("policy_input_pretty"), "dim"),
    )
    for title, value, style in sections:
        if value in (None, ""):
            continue
        out.append(L())
        out.append(L(Seg(title, "title")))
        out.extend(block(value, style, indent="  ", limit=200_000))
    out.append(L())
    out.append(L(Seg("token capture", "title")))
    cap = detail.get("token_capture")
    if not cap:
        out.append(L(Seg("  none on this step", "dim")))
    else:
        status = cap.get("status")
        out.append(L(Seg("  status: ", "key"), S(status, "ok" if status == "complete" else "bad")))
        for name, value in cap.items():
            if name == "status":
                continue
            out.append(kv(name, value if not isinstance(value, (list, dict)) else _compact(value)))
        out.append(L(Seg("  press k to open it in the token inspector", "dim")))
    if detail.get("metadata_keys"):
        out.append(L())
        out.append(kv("metadata keys", ", ".join(map(str, detail["metadata_keys"])), "dim"))
    return out


def protocol_rejections(trace: SourceTrace) -> list[int]:
    """Indices of steps whose action_type is a protocol rejection."""
    out = []
    for i in range(trace.step_count):
        b = trace.brief(i)
        if b.is_protocol_rejection:
            out.append(i)
    return out


# ----------------------------------------------------------------------------- problem marks
@dataclass(frozen=True, slots=True)
class ProblemMark:
    """One integrity problem placed on the line of the object it concerns."""

    code: str
    path: str  # relative to the case root, "/" separated
    message: str
    line: int | None  # the line of ``CaseView.rounds`` it is shown on; None: only in the Integrity tab


def place_problems(view: CaseView, problems: list[tuple[str, str, str]]) -> list[ProblemMark]:
    """Put each (code, case-relative path, message) on the most specific line of the
    Rounds tab whose anchors cover its path: an exact file first, else the deepest
    folder. Problems no line covers stay in the Integrity tab only."""
    exact: dict[str, int] = {}
    folders: list[tuple[str, int]] = []
    for line, paths in view.round_anchors.items():
        for anchor in paths:
            if anchor.endswith("/") or anchor == "":  # "" stands for the whole case
                folders.append((anchor, line))
            else:
                exact.setdefault(anchor, line)
    folders.sort(key=lambda item: len(item[0]), reverse=True)
    marks: list[ProblemMark] = []
    for code, path, message in problems:
        rel = path.replace(os.sep, "/")
        at = exact.get(rel)
        if at is None:
            at = next((ln for folder, ln in folders if rel.startswith(folder)), None)
        marks.append(ProblemMark(code, rel, message, at))
    return marks


def marked_rounds(view: CaseView, marks: list[ProblemMark]) -> list[Line]:
    """The Rounds tab with a warning on every line an integrity problem concerns; an
    ACCEPTED badge whose evidence has a problem is no longer shown as sound."""
    by_line: dict[int, list[ProblemMark]] = {}
    for mark in marks:
        if mark.line is not None:
            by_line.setdefault(mark.line, []).append(mark)
    out: list[Line] = []
    for i, line in enumerate(view.rounds):
        found = by_line.get(i)
        if not found:
            out.append(line)
            continue
        segs = []
        for seg in line:
            if seg.style == "ok-badge":
                seg = Seg(seg.text.rstrip() + " \u26a0 ", "warn-badge", seg.privileged)
            segs.append(seg)
        codes = sorted({m.code for m in found})
        segs.append(Seg(f"  \u26a0 {len(found)} problem{'s' if len(found) != 1 else ''}: {', '.join(codes)} (! shows)", "bad"))
        out.append(tuple(segs))
    return out
