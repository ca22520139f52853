"""The schema strings the driver writes, and the names of a run config's file arguments:
constants only, so the integrity check (run over thousands of cases, and in every worker
process that runs it) does not import the pydantic models to know them.

No Textual import here (architecture rule).
"""

from __future__ import annotations

from eviscene_tui.artifacts.jsonio import BOUND_GZIP_SCHEMA
from eviscene_tui.artifacts.layout import RUN_SCHEMA, SEARCH_SCHEMA

SCHEMA_RUN_RESULT = RUN_SCHEMA  # layout discovers cases by it
SCHEMA_FEEDBACK_SEARCH = SEARCH_SCHEMA
SCHEMA_CANDIDATE = "ifv-psd-candidate-v1"
SCHEMA_ATTEMPT = "ifv-psd-repair-attempt-v1"
SCHEMA_HINT_AUDIT = "ifv-psd-hint-audit-v1"
SCHEMA_SEMANTIC_LOCALIZATION = "ifv-psd-semantic-localization-v1"
SCHEMA_LOCAL_VERIFICATION = "ifv-psd-local-verification-v1"
SCHEMA_VERIFICATION_BUNDLE = "ifv-psd-repair-verification-bundle-v1"
SCHEMA_FINALIZATION = "ifv-psd-repair-finalization-v1"
SCHEMA_TOKEN_CAPTURE = "ifv-policy-token-capture-v1"
SCHEMA_RUNTIME_EVENTS = "ifv-runtime-events-v1"
SCHEMA_CONTEXT_LEDGER = "ifv-context-ledger-v1"
SCHEMA_SERVING_PROFILE = "ifv-qwen-serving-profile-v1"
SCHEMA_CHECKPOINT_MANIFEST = "ifv-qwen-checkpoint-manifest-v1"
SCHEMA_BOUND_GZIP = BOUND_GZIP_SCHEMA  # jsonio writes and reads the envelope
SCHEMA_MEDIA_V1 = "ifv-psd-media-v1"
SCHEMA_MEDIA_V2 = "ifv-psd-media-v2"
SCHEMA_MEDIA_V3 = "ifv-psd-media-v3"

#: Every ``schema_version`` string the reference documents (§2, §3, §5).
KNOWN_SCHEMAS: frozenset[str] = frozenset(
    {
        SCHEMA_RUN_RESULT,
        SCHEMA_FEEDBACK_SEARCH,
        SCHEMA_CANDIDATE,
        SCHEMA_ATTEMPT,
        SCHEMA_HINT_AUDIT,
        SCHEMA_SEMANTIC_LOCALIZATION,
        SCHEMA_LOCAL_VERIFICATION,
        SCHEMA_VERIFICATION_BUNDLE,
        SCHEMA_FINALIZATION,
        SCHEMA_TOKEN_CAPTURE,
        SCHEMA_RUNTIME_EVENTS,
        SCHEMA_CONTEXT_LEDGER,
        SCHEMA_SERVING_PROFILE,
        SCHEMA_CHECKPOINT_MANIFEST,
        SCHEMA_BOUND_GZIP,
        SCHEMA_MEDIA_V1,
        SCHEMA_MEDIA_V2,
        SCHEMA_MEDIA_V3,
    }
)

#: the ``run-inputs.json`` identity keys that are ``{path, sha256}`` file bindings (§2.2)
RUN_FILE_ARGUMENTS: tuple[str, ...] = (
    "trace",
    "candidate",
    "audit",
    "gold",
    "public_context",
    "private_context",
    "image",
    "train_cases",
    "policy_serving_profile",
    "round_start_checkpoint_manifest",
    "semantic_verification",
    "verification_bundle",
    "source_access_policy",
    "search_media",
)
