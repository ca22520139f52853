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

Nothing is re-exported here: a module that needs one part (``policy.events``, say) imports
that module, and does not load the HTTP client and its dependencies with it.
"""
