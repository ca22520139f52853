"""Who the policy is: a serving profile (attested) or an explicit URL + model (unattested).

Uses ``eviscene_tui.artifacts.profile.load_profile`` (engineer A1) when it is
available; otherwise reads the raw ``ifv-qwen-serving-profile-v1`` JSON here.
Either way the rest of the policy package sees a :class:`PolicyTarget`.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

PROFILE_SCHEMA = "ifv-qwen-serving-profile-v1"
API_KEY_ENV = "EVISCENE_POLICY_API_KEY"


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


def _raw_profile(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ProfileError(f"serving profile not found: {path}") from None
    except OSError as exc:
        raise ProfileError(f"cannot read serving profile {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ProfileError(f"serving profile {path} is not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"serving profile {path} is not a JSON object")
    return data


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
            urls += [u if isinstance(u, str) else (u.get("base_url") if isinstance(u, dict) else None) for u in v]
    if isinstance(data.get("base_url"), str):
        urls.insert(0, data["base_url"])
    urls = [normalize_base_url(u) for u in urls if isinstance(u, str) and u.strip()]
    if not urls:
        raise ProfileError(f"serving profile{where} has no base_url")
    dedup = tuple(dict.fromkeys(urls))
    return PolicyTarget(model=pid, base_urls=dedup, attested=True, profile_id=pid, expected_root=root,
                        context_length=ctx, profile_path=path, profile=dict(data))


def load_target_from_profile(path: str | os.PathLike[str]) -> PolicyTarget:
    """Read a serving profile (A1's ``load_profile`` when available) into a target."""
    p = Path(path)
    try:
        from eviscene_tui.artifacts.profile import load_profile
    except ImportError:  # pragma: no cover - A1's module is part of the tree
        load_profile = None
    if load_profile is None:
        return target_from_profile_dict(_raw_profile(p), path=str(p))
    result = load_profile(p)
    prof, problems = result if isinstance(result, tuple) else (result, [])
    if prof is None:
        msgs = "; ".join(getattr(x, "message", str(x)) for x in problems) or "unreadable"
        if not p.exists():
            msgs = f"serving profile not found: {p}"
            raise ProfileError(msgs)
        raise ProfileError(f"serving profile {p}: {msgs}")
    raw = _profile_as_dict(prof) or {}
    tgt = target_from_profile_dict(raw, path=str(p))
    try:
        urls = tuple(normalize_base_url(u) for u in prof.base_urls())
        if urls:
            tgt = replace(tgt, base_urls=tuple(dict.fromkeys(urls)))
    except Exception:
        pass
    return tgt


def _profile_as_dict(prof: Any) -> dict[str, Any] | None:
    if isinstance(prof, dict):
        return prof
    for attr in ("raw", "data"):
        v = getattr(prof, attr, None)
        if isinstance(v, dict):
            return v
    dump = getattr(prof, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", by_alias=True)
        except Exception:
            return None
    return None


def unattested_target(url: str, model: str) -> PolicyTarget:
    if not url or not model:
        raise ProfileError("an unattested session needs both --policy-url and --policy-model")
    return PolicyTarget(model=model, base_urls=(normalize_base_url(url),), attested=False)


# ---------------------------------------------------------------------------- config


@dataclass(frozen=True)
class PolicyConfig:
    """Client settings. ``api_key`` is never shown, logged or written (``repr`` hides it)."""

    connect_timeout: float = 5.0
    read_timeout: float = 600.0  # covers queueing + prefill (first token)
    stall_timeout: float = 120.0  # max silence between chunks once tokens flow
    temperature: float = 0.7
    max_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    return_tokens_as_token_ids: bool = False
    hint_placement: str = "as_run"
    status_interval: float = 3.0
    direct_body: bool = True  # read stream bodies straight from the connection (policy/direct_body.py)
    api_key: str | None = field(default=None, repr=False)

    def scrub(self, text: str) -> str:
        return scrub_secret(text, self.api_key)


def scrub_secret(text: str, secret: str | None) -> str:
    if secret and text:
        text = text.replace(secret, "***")
    return text


_CONFIG_KEYS = {
    "connect_timeout": float, "read_timeout": float, "stall_timeout": float, "temperature": float,
    "max_tokens": int, "logprobs": bool, "top_logprobs": int, "return_tokens_as_token_ids": bool,
    "hint_placement": str, "status_interval": float, "direct_body": bool,
}


def load_policy_config(config_path: str | os.PathLike[str] | None = None, **overrides: Any) -> PolicyConfig:
    """Settings from the ``[policy]`` table of a TOML config file, then the
    ``EVISCENE_POLICY_API_KEY`` environment variable (wins over the file's ``api_key``),
    then explicit overrides."""
    values: dict[str, Any] = {}
    path = config_path or os.environ.get("EVISCENE_TUI_CONFIG")
    if path and Path(path).is_file():
        try:
            doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            doc = {}
        table = doc.get("policy") if isinstance(doc.get("policy"), dict) else {}
        for key, typ in _CONFIG_KEYS.items():
            if key in table:
                try:
                    values[key] = typ(table[key])
                except (TypeError, ValueError):
                    pass
        if isinstance(table.get("api_key"), str) and table["api_key"]:
            values["api_key"] = table["api_key"]
    env_key = os.environ.get(API_KEY_ENV)
    if env_key:
        values["api_key"] = env_key
    values.update({k: v for k, v in overrides.items() if v is not None})
    from eviscene_tui.policy.request import HINT_PLACEMENTS

    if values.get("hint_placement", "as_run") not in HINT_PLACEMENTS:
        raise ValueError(f"hint_placement must be one of {', '.join(HINT_PLACEMENTS)}, not {values['hint_placement']!r}")
    return PolicyConfig(**values)
