"""Save every continuation attempt as a NEW file in the app's work directory.

``<workdir>/continuations/<case-key>-<UTC stamp>-<random>.json`` (pretty JSON,
schema ``eviscene-tui-continuation-v1``), written with ``WorkDir.write_new``
(tmp + fsync + link: an existing name is never overwritten, and the WorkDir
refuses any path inside the evidence root). Images appear by hash only. The
API key is never part of a record. ``status`` is ``complete`` only for a
stream that reached ``[DONE]`` with a finish reason and no error.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.profile import PolicyTarget
from eviscene_tui.policy.request import TeacherRequest, redact_images
from eviscene_tui.storage import WorkDir, unique_name

RECORD_SCHEMA = "eviscene-tui-continuation-v1"
SUBDIR = "continuations"


def _key(text: str | None) -> str:
    k = re.sub(r"[^A-Za-z0-9._-]+", "_", text or "case").strip("._") or "case"
    return k[:48]


def build_record(
    acc: StreamAccumulator,
    *,
    target: PolicyTarget,
    request: TeacherRequest | None,
    body: dict[str, Any] | None,
    case_ref: dict[str, Any] | None = None,
    status: str | None = None,
    error: dict[str, Any] | None = None,
    secret: str | None = None,
) -> dict[str, Any]:
    st = status or acc.status
    err = error if error is not None else (acc.error.to_json() if acc.error else None)
    if st == "cancelled" and err is None:
        err = {"kind": "cancelled", "message": "cancelled by the operator", "status": None, "error_type": None}
    att = acc.attestation.to_json() if acc.attestation else None
    rec: dict[str, Any] = {
        "schema_version": RECORD_SCHEMA,
        "status": st,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "case": case_ref or {},
        "policy": {**target.describe(), "base_url_used": acc.base_url},
        "attestation_mode": target.label,
        "attestation": att,
        "request": {
            "origin": request.origin() if request else None,
            "hint": request.hint if request else None,
            "hint_placement": request.hint_placement if request else None,
            "hint_rule": request.hint_rule() if request else None,
            "hint_template": request.hint_template.to_json() if request and request.hint_template else None,
            "hint_location": request.hint_location if request else None,
            "images": [i.to_json() for i in request.images] if request else [],
            "problems": list(request.problems) if request else [],
            "body": redact_images(body, request.images if request else None) if body is not None else None,
        },
        "prompt_token_ids": acc.prompt_token_ids,
        "completion_token_ids": list(acc.completion_token_ids),
        "reasoning": acc.reasoning_text(),
        "content": acc.content_text(),
        "tool_calls": acc.tool_calls_json(),
        "logprobs": [lp.to_json() for lp in acc.logprobs] if acc.logprobs else None,
        "finish_reason": acc.finish_reason,
        "stop_reason": acc.stop_reason,
        "usage": acc.usage.raw if acc.usage else None,
        "accounting": acc.accounting(),
        "served_model": acc.served_model(),
        "non_integer_token_ids": acc.token_id_faults(),
        "timings": acc.timings(),
        "error": err,
    }
    if secret:
        _assert_no_secret(rec, secret)
    return rec


def _assert_no_secret(obj: Any, secret: str) -> None:
    """Belt and braces: scrub the key from any string (it should never be there)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, str) and secret in v:
                obj[k] = v.replace(secret, "***")
            else:
                _assert_no_secret(v, secret)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if isinstance(v, str) and secret in v:
                obj[i] = v.replace(secret, "***")
            else:
                _assert_no_secret(v, secret)


def save_record(work: WorkDir, record: dict[str, Any], *, stem: str | None = None) -> Path:
    """Write ``record`` as a new file; never overwrites (retries with a fresh name)."""
    name_stem = _key(stem or (record.get("case") or {}).get("case_id") or (record.get("case") or {}).get("case_key"))
    data = orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n"
    last: Exception | None = None
    for _ in range(5):
        target = work.sub(SUBDIR, unique_name(name_stem, ".json"))
        try:
            return work.write_new(target, data)
        except FileExistsError as exc:  # astronomically unlikely: try another random name
            last = exc
    assert last is not None  # the loop ran and every try collided
    raise last


def list_records(work: WorkDir) -> list[Path]:
    d = work.path / SUBDIR
    if not d.is_dir():
        return []
    return sorted(p for p in d.glob("*.json") if not p.name.startswith("."))
