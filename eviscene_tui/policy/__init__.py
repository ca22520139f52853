"""Live teacher continuations from the vLLM-served policy (Textual-free services).

Modules:
- ``profile``: PolicyTarget (attested profile or unattested URL+model), resolve_policy_target (THE rule);
- ``config``: PolicyConfig (client settings) and policy_config (from the ``[policy]`` settings);
- ``client``: PolicyClient (attest before every call, replica choice, SSE streaming, status polling),
  validate_live_model, parse_metrics;
- ``sse``: SSEDecoder and chunk decoding into typed ``events``;
- ``request``: TeacherRequest, the hint placement rule (apply_hint), chat_body, describe_request;
- ``casefile``: rebuild_for_case / round_hint / case_ref for a loaded CaseBundle;
- ``accumulate``: StreamAccumulator (text parts, ids, accounting, timings);
- ``recording``: continuation records in the work directory (never overwritten);
- ``session``: run_continuation / record_failure (attest + stream + fold + record);
- ``capture``: LiveSnapshot / live_capture: a continuation as a token capture for the token
  inspector (teacher prompt ids + completion ids, logprobs, usage, student/teacher diff).
"""

from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.client import PolicyClient, ServerStatus, validate_live_model
from eviscene_tui.policy.events import Attestation, Delta, PolicyEvent, StreamError, ToolCallDelta
from eviscene_tui.policy.config import PolicyConfig, policy_config
from eviscene_tui.policy.profile import PolicyTarget, ProfileError, load_target_from_profile, resolve_policy_target, unattested_target
from eviscene_tui.policy.request import RequestUnavailable, TeacherRequest, apply_hint, chat_body, describe_request, with_hint
from eviscene_tui.settings import HINT_PLACEMENTS
from eviscene_tui.policy.session import ContinuationOutcome, record_failure, run_continuation

__all__ = [
    "Attestation", "ContinuationOutcome", "Delta", "HINT_PLACEMENTS", "PolicyClient", "PolicyConfig", "PolicyEvent",
    "PolicyTarget", "ProfileError", "RequestUnavailable", "ServerStatus", "StreamAccumulator", "StreamError",
    "TeacherRequest", "ToolCallDelta", "apply_hint", "chat_body", "describe_request", "policy_config", "resolve_policy_target",
    "load_target_from_profile", "record_failure", "run_continuation", "unattested_target", "validate_live_model", "with_hint",
]
