"""Running the approved hint's teacher continuation.

The bundled driver takes any ``continuation_runner``: an async callable ``runner(job: ContinuationJob) -> ContinuationOutcome``. The
default, :class:`PolicyContinuationRunner`, uses the policy package:
the failure step's request rebuilt from the runtime archive
(``CaseBundle.source_step_request`` -> ``policy.request.teacher_request_from_archived``,
which inserts the hint by its one documented rule), the attested client
(``PolicyClient.continuation``: ``GET /models`` attestation before the call,
then ``/chat/completions`` streaming with token ids), and the typed events,
which are forwarded to ``job.on_event`` as they arrive (the driver appends them to the
sidecar's live channel).
With a ``work`` directory, the policy session recorder also saves every attempt
(complete, cancelled or failed) as its own record there.

Log-probabilities are always requested (``top_logprobs`` 20, as the driver's
``IFV_POLICY_TOPK``): without them the teacher capture would be ``incomplete``
(missing ``completion_logprobs``) and the driver would refuse the record.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.casefile import case_ref, observed_hint_template
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.events import PolicyEvent, TokenLogprob
from eviscene_tui.policy.profile import PolicyTarget
from eviscene_tui.policy.request import RequestUnavailable, TeacherRequest, chat_body, redact_images, teacher_request_from_archived
from eviscene_tui.policy.session import run_continuation
from eviscene_tui.storage import WorkDir


if TYPE_CHECKING:
    from eviscene_tui.artifacts.case import CaseBundle
    from eviscene_tui.artifacts.runtime_archive import ArchivedRequest

DEFAULT_TOPK = 20


@dataclass
class ContinuationJob:
    case: CaseBundle | None  # None for custom runners that need no case
    source_step_index: int
    hint: str
    round_index: int
    on_event: Callable[[PolicyEvent], None] | None = None
    # told the exact request before it is sent (where the hint went, for the live channel)
    on_request: Callable[[TeacherRequest], None] | None = None


@dataclass
class ContinuationOutcome:
    status: str  # complete | failed | cancelled
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_token_ids: list[int] = field(default_factory=list)
    completion_token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    topk: int = 0
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    attestation: dict[str, Any] | None = None  # {model_id, root, max_model_len} when checked
    attestation_status: str | None = None  # attested | unattested | refused
    error: str | None = None
    error_type: str | None = None
    request: dict[str, Any] | None = None  # the body sent, images redacted
    images: list[tuple[str, str, bytes]] = field(default_factory=list)  # (sha256, mime, bytes) of the request's images
    policy_model: str | None = None
    policy_base_url: str | None = None
    record_path: str | None = None  # the policy session's continuation record in the work dir, when saved
    timings: dict[str, Any] | None = None  # ttft_s, wall_s, tokens_per_s as measured while it streamed

    @property
    def ok(self) -> bool:
        return self.status == "complete"


ContinuationRunner = Callable[[ContinuationJob], Awaitable[ContinuationOutcome]]


def outcome_from_accumulator(acc: StreamAccumulator, *, topk: int = 0) -> ContinuationOutcome:
    """Convert the policy client's ``StreamAccumulator`` into a :class:`ContinuationOutcome`."""
    if acc.cancelled:
        status = "cancelled"
    elif acc.error is not None:
        status = "failed"
    elif acc.done:
        status = "complete"
    else:
        status = "failed"
    att = acc.attestation
    out = ContinuationOutcome(
        timings=acc.timings() if acc.t_sent is not None else None,
        status=status,
        content="".join(acc.content),
        reasoning="".join(acc.reasoning),
        tool_calls=[
            {"id": tc.id, "name": tc.name, "arguments": "".join(tc.arguments)} for _, tc in sorted(acc.tool_calls.items())
        ],
        prompt_token_ids=list(acc.prompt_token_ids or []),
        completion_token_ids=list(acc.completion_token_ids),
        logprobs=list(acc.logprobs),
        topk=topk,
        finish_reason=acc.finish_reason,
        usage=(
            {"prompt_tokens": acc.usage.prompt_tokens, "completion_tokens": acc.usage.completion_tokens, "total_tokens": acc.usage.total_tokens}
            if acc.usage is not None
            else {}
        ),
        attestation=(
            {"model_id": att.model_id, "root": att.root, "max_model_len": att.max_model_len}
            if att is not None and att.ok and att.status == "attested"
            else None
        ),
        attestation_status=att.status if att is not None else None,
        error=acc.error.message if acc.error is not None else ("cancelled" if acc.cancelled else None),
        error_type=acc.error.kind if acc.error is not None else ("cancelled" if acc.cancelled else None),
        policy_model=acc.model,
        policy_base_url=acc.base_url,
    )
    if status == "failed" and out.error is None:
        out.error, out.error_type = "the stream ended without [DONE]", "disconnect"
    return out


class PolicyContinuationRunner:
    """The default runner over the attested policy client."""

    def __init__(
        self, target: PolicyTarget, config: PolicyConfig | None = None, *, topk: int = DEFAULT_TOPK, work: WorkDir | None = None
    ) -> None:
        base = config or PolicyConfig()
        self.work = work  # every attempt is also recorded here by the policy session recorder
        self.target = target
        self.config = dataclasses.replace(base, logprobs=True, top_logprobs=topk or base.top_logprobs)
        self.topk = self.config.top_logprobs

    def _request(self, job: ContinuationJob) -> tuple[TeacherRequest | None, ArchivedRequest | None, str | None]:
        """(teacher request, archived request, None) or (None, None, why not). File work:
        the failure step's archived request and, for ``as_run``, the run's hinted requests;
        run in a thread so the event loop (the UI's) never waits on the disk."""
        if job.case is None:
            return None, None, "no case to rebuild the failure step's request from"
        archived, problems = job.case.source_step_request(job.source_step_index)
        if archived is None:
            detail = "; ".join(p.message for p in problems) or "unknown reason"
            return None, None, f"the failure step's request cannot be rebuilt: {detail}"
        notes: list[str] = []
        template = observed_hint_template(job.case, notes=notes) if self.config.hint_placement == "as_run" else None
        try:
            req = teacher_request_from_archived(
                archived,
                hint=job.hint,
                placement=self.config.hint_placement,
                step_index=job.source_step_index,
                round_index=job.round_index,
                problems=notes,
                template=template,
            )
        except RequestUnavailable as exc:
            return None, None, str(exc)
        return req, archived, None

    async def __call__(self, job: ContinuationJob) -> ContinuationOutcome:
        req, archived, why_not = await asyncio.to_thread(self._request, job)
        if req is None:
            return ContinuationOutcome(status="failed", error=why_not, error_type="request", topk=self.topk)
        if job.on_request is not None:
            job.on_request(req)
        acc = StreamAccumulator()
        # the record names its case as the stream screen's records do (the token inspector
        # lists a case's recorded captures by it), and says it is a repair round's
        ref: dict[str, Any] = (
            case_ref(job.case, job.round_index) if job.case is not None else {"case_id": None, "case_key": None, "round_index": job.round_index}
        )
        ref["origin"] = "repair"
        async with PolicyClient(self.target, self.config) as client:
            result = await run_continuation(client, req, work=self.work, case_ref=ref, on_event=job.on_event, accumulator=acc)
            body = chat_body(req, self.config, model=self.target.model)
        out = outcome_from_accumulator(acc, topk=self.topk)
        out.request = redact_images(body, req.images)
        out.images = [(img.sha256, img.mime, img.data) for img in (archived.images if archived is not None else [])]
        if result.path is not None:
            out.record_path = str(result.path)
        return out
