"""One-line summaries of the policy server(s) for status bars (no Textual import).

The app polls ``/health``, ``/version``, ``/v1/models`` and ``/metrics`` through
:meth:`PolicyClient.poll_status`; this module turns a poll into text. Callers
still pass the text through ``safe_text`` before display (server strings are
untrusted).
"""

from __future__ import annotations

from collections.abc import Iterable

from eviscene_tui.policy.client import ServerStatus
from eviscene_tui.policy.profile import NO_POLICY, ProfileError


def _count(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def _percent(value: float | None) -> str:
    return "?" if value is None else f"{value * 100:.0f}%"


def replica_summary(status: ServerStatus) -> str:
    if not status.reachable:
        return f"{status.base_url}: unreachable" + (f" ({status.error})" if status.error else "")
    health = "healthy" if status.healthy else "UNHEALTHY"
    return (
        f"{status.base_url}: {health} v{status.version or '?'} "
        f"run {_count(status.running)} wait {_count(status.waiting)} kv {_percent(status.kv_cache)} "
        f"ctx {status.max_model_len or '?'}"
    )


def status_summary(statuses: Iterable[ServerStatus]) -> str:
    return " | ".join(replica_summary(s) for s in statuses)


__all__ = ["NO_POLICY", "ProfileError", "replica_summary", "status_summary"]
