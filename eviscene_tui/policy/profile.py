"""Who the policy is: a serving profile (attested) or an explicit URL + model (unattested).

Profiles are read by ``eviscene_tui.artifacts.profile.load_profile``; the rest of the
policy package sees a :class:`PolicyTarget`. :func:`resolve_policy_target` is the one
rule choosing between them from the command-line flags.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eviscene_tui.artifacts.profile import load_profile

PROFILE_SCHEMA = "ifv-qwen-serving-profile-v1"


class ProfileError(ValueError):
    """A profile that cannot be used (missing, unreadable, wrong schema, missing field)."""


@dataclass(frozen=True)
class PolicyTarget:
    """The policy endpoint(s) and what attestation must find there."""

    model: str  # served alias sent as ``model``
    base_urls: tuple[str, ...]  # each ends in /v1 (no trailing slash)
    attested: bool  # False for --policy-url/--policy-model sessions
    profile_id: str | None = None
    expected_root: str | None = None  # engine_model_path or model_path
    context_length: int | None = None
    profile_path: str | None = None
    profile: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def label(self) -> str:
        return "attested" if self.attested else "unattested"

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base_urls": list(self.base_urls),
            "attestation_mode": self.label,
            "profile_id": self.profile_id,
            "expected_root": self.expected_root,
            "context_length": self.context_length,
            "profile_path": self.profile_path,
        }


def normalize_base_url(url: str) -> str:
    """Strip trailing ``/``; add ``/v1`` when the URL has no path (``http://h:p``)."""
    u = url.strip().rstrip("/")
    scheme_split = u.split("://", 1)
    rest = scheme_split[1] if len(scheme_split) == 2 else u
    if "/" not in rest:
        u = u + "/v1"
    return u


def server_root(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p`` (for /health, /metrics, /version, /tokenize)."""
    u = base_url.rstrip("/")
    return u[:-3] if u.endswith("/v1") else u


def target_from_profile_dict(data: dict[str, Any], *, path: str | None = None) -> PolicyTarget:
    where = f" in {path}" if path else ""
    if data.get("schema_version") != PROFILE_SCHEMA:
        raise ProfileError(f"serving profile{where} has schema_version {data.get('schema_version')!r}, expected {PROFILE_SCHEMA!r}")
    pid = data.get("profile_id")
    if not isinstance(pid, str) or not pid:
        raise ProfileError(f"serving profile{where} has no profile_id")
    root = data.get("engine_model_path") or data.get("model_path")
    if not isinstance(root, str) or not root:
        raise ProfileError(f"serving profile{where} has neither engine_model_path nor model_path")
    ctx = data.get("context_length")
    if not isinstance(ctx, int) or isinstance(ctx, bool):
        raise ProfileError(f"serving profile{where} has no integer context_length")
    urls: list[str] = []
    for key in ("base_urls", "replica_base_urls", "replicas"):
        v = data.get(key)
        if isinstance(v, list):
            for u in v:
                url = u if isinstance(u, str) else (u.get("base_url") if isinstance(u, dict) else None)
                if isinstance(url, str):
                    urls.append(url)
    if isinstance(first := data.get("base_url"), str):
        urls.insert(0, first)
    urls = [normalize_base_url(u) for u in urls if isinstance(u, str) and u.strip()]
    if not urls:
        raise ProfileError(f"serving profile{where} has no base_url")
    dedup = tuple(dict.fromkeys(urls))
    return PolicyTarget(model=pid, base_urls=dedup, attested=True, profile_id=pid, expected_root=root,
                        context_length=ctx, profile_path=path, profile=dict(data))


def load_target_from_profile(path: str | os.PathLike[str]) -> PolicyTarget:
    """Read a serving profile (``artifacts.profile.load_profile``) into a target."""
    p = Path(path)
    prof, problems = load_profile(p)
    if prof is None:
        if not p.exists():
            raise ProfileError(f"serving profile not found: {p}")
        raise ProfileError(f"serving profile {p}: {'; '.join(x.message for x in problems) or 'unreadable'}")
    tgt = target_from_profile_dict(prof.model_dump(mode="json", by_alias=True), path=str(p))
    urls = tuple(normalize_base_url(u) for u in prof.base_urls())
    if urls:
        tgt = replace(tgt, base_urls=tuple(dict.fromkeys(urls)))
    return tgt


def unattested_target(url: str, model: str) -> PolicyTarget:
    if not url or not model:
        raise ProfileError("an unattested session needs both --policy-url and --policy-model")
    return PolicyTarget(model=model, base_urls=(normalize_base_url(url),), attested=False)


#: what every surface says when no policy server was given
NO_POLICY = "no policy server configured: start with --policy-profile FILE (attested) or --policy-url URL --policy-model NAME (unattested)"


def resolve_policy_target(
    *, profile: str | os.PathLike[str] | None, url: str | None, model: str | None
) -> PolicyTarget | None:
    """THE rule choosing the policy server, used by every surface (status bar, stream
    screen, supervised search, ``stream`` command):

    - a serving profile: attested (together with ``--policy-url``/``--policy-model`` it is
      ambiguous which server is meant: :class:`ProfileError`);
    - ``--policy-url`` with ``--policy-model``: unattested;
    - one of the pair without the other is an error (:class:`ProfileError` naming the missing flag);
    - nothing given: None (callers say :data:`NO_POLICY`).
    """
    if profile and (url or model):
        raise ProfileError("use either --policy-profile or --policy-url/--policy-model, not both")
    if profile:
        return load_target_from_profile(profile)
    if url and model:
        return unattested_target(url, model)
    if url:
        raise ProfileError("an unattested session needs both --policy-url and --policy-model (--policy-model is missing)")
    if model:
        raise ProfileError("an unattested session needs both --policy-url and --policy-model (--policy-url is missing)")
    return None
