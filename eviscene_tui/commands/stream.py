"""``eviscene-tui stream CASE_PATH``: a hinted teacher continuation without the UI.

Attests the policy server (unless ``--policy-url/--policy-model``: unattested),
rebuilds the failure step's request with the hint, streams the continuation to
stdout and saves a record in the work directory.

Output: plain text as it arrives (sanitised), or with ``--json`` one JSON object
per line per event: ``request``, ``attestation``, ``started``, ``prompt_tokens``,
``delta`` (with its token ids), ``tool_call``, ``finish``, ``usage``, ``error``,
and a final ``record`` line with the saved file's path and status.

Exit: 0 complete; 1 server, attestation or request failure; 2 bad usage;
130 after Ctrl-C (the record is saved as ``cancelled``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO

from eviscene_tui.artifacts.case import CaseBundle, load_case
from eviscene_tui.cli import UsageError, add_path_map_argument, add_policy_arguments, path_map_from_args, policy_target_from_args
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.casefile import case_ref, rebuild_for_case, round_hint, site_for_round
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.config import PolicyConfig, policy_config
from eviscene_tui.policy.events import Attested, Delta, StreamError, ToolCallDelta, event_to_json
from eviscene_tui.policy.profile import PolicyTarget
from eviscene_tui.policy.request import TeacherRequest, RequestUnavailable, chat_body, redact_images
from eviscene_tui.policy.session import record_failure, run_continuation
from eviscene_tui.safe_text import safe_text, terminal_json
from eviscene_tui.settings import HINT_PLACEMENTS, Settings, load_settings
from eviscene_tui.journal.records import record_key, register_workdir
from eviscene_tui.storage import WORKDIR_RULE, EvidenceWriteRefused, WorkDir, choose_workdir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("case_path", help="a case folder (driver search root or run directory)")
    parser.add_argument("--round", type=int, default=None, help="feedback round whose failure site and hint to use (default: the current site)")
    hint = parser.add_mutually_exclusive_group()
    hint.add_argument("--hint", help="hint text (default: the round's hint)")
    hint.add_argument("--hint-file", help="read the hint text from this file")
    add_policy_arguments(parser)
    parser.add_argument("--workdir", help=f"where records go; {WORKDIR_RULE}")
    parser.add_argument("--config", help="config file ([policy] table: timeouts, temperature, logprobs, hint_placement, api_key)")
    parser.add_argument("--hint-placement", choices=HINT_PLACEMENTS, help="override the configured hint placement (as_run: as the run's own hinted requests show; the default)")
    parser.add_argument("--read-timeout", type=float, help="seconds to wait for the first complete event (queueing + prefill)")
    parser.add_argument("--stall-timeout", type=float, help="seconds without a complete event tolerated once tokens flow (a trickle of bytes is not progress)")
    parser.add_argument("--stream-deadline", type=float, help="seconds the whole stream may take (default: read timeout + max_tokens at [policy] min_token_rate)")
    parser.add_argument("--max-tokens", type=int, help="max_tokens for the continuation")
    parser.add_argument("--json", action="store_true", help="one JSON object per line per event")
    add_path_map_argument(parser)


class _Out:
    """Writes events to stdout (plain or JSON lines) and notes to stderr."""

    def __init__(self, json_mode: bool, out: TextIO, err: TextIO) -> None:
        self.json_mode, self.out, self.err = json_mode, out, err
        self._kind: str | None = None

    def json(self, obj: dict[str, Any]) -> None:
        self.out.write(terminal_json(obj).decode() + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        self.err.write(safe_text(text) + "\n")
        self.err.flush()

    def event(self, ev: Any) -> None:
        if self.json_mode:
            self.json(event_to_json(ev))
            return
        if isinstance(ev, Delta) and ev.text:
            self._delta(ev)
        elif isinstance(ev, ToolCallDelta):
            self._tool_call(ev)
        elif isinstance(ev, Attested):
            a = ev.attestation
            self.note(f"attestation: {a.status} {a.base_url} — {a.message}")
        elif isinstance(ev, StreamError):
            self._error(ev)

    def _section(self, kind: str, heading: str) -> None:
        """Start a new ``[heading]`` section on its own line when the stream's kind changes."""
        self.out.write(("\n" if self._kind else "") + f"[{heading}]\n")
        self._kind = kind

    def _delta(self, ev: Delta) -> None:
        if ev.kind != self._kind:
            self._section(ev.kind, ev.kind)
        self.out.write(safe_text(ev.text))
        self.out.flush()

    def _tool_call(self, ev: ToolCallDelta) -> None:
        if ev.name:
            self._section("tool", f"tool_call {safe_text(ev.name, single_line=True)}")
        if ev.arguments:
            self.out.write(safe_text(ev.arguments))
        self.out.flush()

    def _error(self, ev: StreamError) -> None:
        if self._kind:
            self.out.write("\n")
            self.out.flush()
        self.note(f"error ({ev.kind}{', HTTP ' + str(ev.status) if ev.status else ''}): {ev.message}")


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    o = _Out(bool(args.json), out or sys.stdout, err or sys.stderr)
    root = _case_folder(args.case_path)
    target = policy_target_from_args(args)
    settings = load_settings(args.config)
    for problem in settings.problems:
        o.note(f"warning: {problem}")
    hint_text = _hint_from_file(args) if args.hint_file else args.hint
    config = _config_from(args, settings)
    work, why = _work_dir(args, root, settings)
    o.note(f"work directory: {work.path} ({why})")  # where the record goes, before anything is written
    case = _case_with_site(root, args, settings)
    register_workdir(work.path, record_key(root), root)  # the record is found again from any folder
    ref = case_ref(case, args.round)
    if hint_text is None:
        hint_text = round_hint(case, args.round)
    try:
        request = rebuild_for_case(case, round_index=args.round, hint=hint_text, placement=config.hint_placement)
    except RequestUnavailable as exc:
        outcome = record_failure(target, work=work, kind="request", message=str(exc), case_ref=ref)
        o.event(StreamError("request", str(exc)))
        _final(o, outcome)
        return 1
    _show_request(o, request, config, target)
    return _stream(o, target, config, request, work, ref)


def _case_folder(given: str) -> Path:
    root = Path(given)
    if not root.exists():
        raise UsageError(f"{root} does not exist")
    if not root.is_dir():
        raise UsageError(f"{root} is not a case folder")
    return root


def _hint_from_file(args: argparse.Namespace) -> str:
    try:
        return Path(args.hint_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read --hint-file {args.hint_file}: {exc}") from None


def _config_from(args: argparse.Namespace, settings: Settings) -> PolicyConfig:
    try:
        return policy_config(
            settings.policy, hint_placement=args.hint_placement, read_timeout=args.read_timeout,
            stall_timeout=args.stall_timeout, max_tokens=args.max_tokens, stream_deadline=args.stream_deadline,
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"bad policy configuration: {exc}") from None


def _work_dir(args: argparse.Namespace, root: Path, settings: Settings) -> tuple[WorkDir, str]:
    """The work directory (``storage.choose_workdir``: for a case streamed on its own,
    ``<case>.eviscene-tui`` beside it) and why it is that one."""
    path, why = choose_workdir(root, args.workdir, settings.paths.workdir)
    try:
        return WorkDir(path, evidence_roots=[root]), why
    except EvidenceWriteRefused as exc:
        raise UsageError(str(exc)) from None


def _case_with_site(root: Path, args: argparse.Namespace, settings: Settings) -> CaseBundle:
    """The case, refused (before anything is written to the work directory) when the
    asked round does not exist or has no localized failure site to continue from."""
    case = load_case(root, path_map=path_map_from_args(args, settings))
    if args.round is not None and case.round(args.round) is None:
        raise UsageError(f"case has no round {args.round}")
    if site_for_round(case, args.round) is None:
        which = f"round {args.round}" if args.round is not None else "this case"
        raise UsageError(f"{which} has no localized failure site, so there is no failure step to stream a continuation from; nothing was written")
    return case


def _show_request(o: _Out, request: TeacherRequest, config: PolicyConfig, target: PolicyTarget) -> None:
    body = chat_body(request, config, model=target.model)
    if o.json_mode:
        o.json({
            "type": "request", "attestation_mode": target.label, "origin": request.origin(),
            "hint": request.hint, "hint_placement": request.hint_placement, "hint_location": request.hint_location,
            "hint_rule": request.hint_rule(),
            "images": [i.to_json() for i in request.images], "problems": request.problems,
            "body": redact_images(body, request.images),
        })
        return
    o.note(f"policy: {target.model} ({target.label}) via {', '.join(target.base_urls)}")
    o.note(f"request: {request.source} {request.request_id or ''} step {request.step_index}")
    o.note(f"hint placement: {request.hint_rule()}")
    for p in request.problems:
        o.note(f"note: {p}")


def _stream(o: _Out, target: PolicyTarget, config: PolicyConfig, request: TeacherRequest, work: WorkDir, ref: dict[str, Any]) -> int:
    """Stream the continuation to ``o``; 0 complete, 1 failed, 130 after Ctrl-C (saved as cancelled)."""
    outcome_box: list[Any] = []
    acc = StreamAccumulator()

    async def main() -> None:
        async with PolicyClient(target, config) as client:
            outcome_box.append(await run_continuation(client, request, work=work, case_ref=ref, on_event=o.event, accumulator=acc))

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        path = str(acc.record_path) if acc.record_path else None
        if o.json_mode:
            o.json({"type": "record", "status": "cancelled", "path": path})
        else:
            o.note(f"cancelled; record saved: {path}")
        return 130
    outcome = outcome_box[0]
    _final(o, outcome)
    return 0 if outcome.status == "complete" else 1


def _final(o: _Out, outcome: Any) -> None:
    acc = outcome.accumulator
    if o.json_mode:
        o.json({
            "type": "record", "status": outcome.status, "path": str(outcome.path) if outcome.path else None,
            "save_error": outcome.save_error, "accounting": acc.accounting(), "served_model": acc.served_model(),
            "non_integer_token_ids": acc.token_id_faults(), "timings": acc.timings(),
            "finish_reason": acc.finish_reason, "error": acc.error.to_json() if acc.error else None,
        })
        return
    if acc.content or acc.reasoning or acc.tool_calls:
        o.out.write("\n")
        o.out.flush()
    t = acc.timings()
    def shown(value: Any, unit: str = "") -> str:
        return "n/a" if value is None else f"{value}{unit}"

    o.note(f"status: {outcome.status}; finish_reason: {shown(acc.finish_reason)}; tokens: {acc.token_count}; "
           f"ttft: {shown(t['ttft_s'], ' s')}; tokens/s: {shown(t['tokens_per_s'])}; wall: {shown(t['wall_s'], ' s')}")
    o.note(f"accounting: {acc.accounting()['note']}")
    o.note(f"served model: {acc.served_model()['note']}")
    if acc.bad_token_ids:
        o.note(f"token ids: {acc.token_id_faults()['note']}")
    if outcome.save_error:
        o.note(outcome.save_error)
    else:
        o.note(f"record: {outcome.path}")
