"""Hint audit with the reference's codes (psd-run-format §2.6, §4.2.3).

Rules (the driver's exact ``audit_hint`` lives in the unretrieved newest
runtime; these are this app's documented versions):

- ``hint_empty``: nothing left after ``strip()``;
- ``hint_too_long``: more than 1200 characters (stripped text);
- ``hint_level_invalid``: level is not an integer in 1..3;
- ``binary_verdict_leak``: the hint names a verdict. A verdict word is one of
  ``real, fake, authentic, inauthentic, genuine, fabricated, forged, doctored,
  manipulated, tampered, unaltered, ai-generated``, matched case-insensitively as
  a whole word that is not part of a hyphenated compound ("real-world" and
  "fake-looking" do not count; "fake" and "REAL." do);
- ``private_value_leak``: a string value of the private context (gold, private
  references) with at least :data:`PRIVATE_MIN_CHARS` non-blank characters
  appears in the hint (case-insensitive, whitespace-normalised). ``leak_paths``
  lists the JSON paths of the leaked values, e.g. ``$.evidence[0].title``;
- with ``feedback``: ``repeated_completed_hint`` / ``changed_verified_hint``
  (:func:`revision_rejection`: a locked hint must be kept verbatim followed by ``\\n``).

The result is the driver's audit dict ``{schema_version, passed, hint_level,
hint_chars, hint_sha256, errors, leak_paths}``; ``reason`` (first error or "")
is added for display and for ``proposer-hint-audits.json`` rows.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Mapping

from eviscene_tui.artifacts.jsonio import hint_sha256
from eviscene_tui.gate.protocol import revision_rejection

AUDIT_SCHEMA = "ifv-psd-hint-audit-v1"
MAX_HINT_CHARS = 1200
PRIVATE_MIN_CHARS = 8
VALID_LEVELS = (1, 2, 3)
VERDICT_WORDS = (
    "real",
    "fake",
    "authentic",
    "inauthentic",
    "genuine",
    "fabricated",
    "forged",
    "doctored",
    "manipulated",
    "tampered",
    "unaltered",
    "ai-generated",
)
_VERDICT_RE = re.compile(
    r"(?<![\w-])(" + "|".join(re.escape(w) for w in sorted(VERDICT_WORDS, key=len, reverse=True)) + r")(?![\w-])",
    re.IGNORECASE,
)
AUDIT_CODES = (
    "hint_empty",
    "hint_too_long",
    "hint_level_invalid",
    "binary_verdict_leak",
    "private_value_leak",
    "repeated_completed_hint",
    "changed_verified_hint",
)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _strings(value: Any, path: str = "$") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def verdict_words(text: str) -> list[str]:
    return [m.group(1) for m in _VERDICT_RE.finditer(text or "")]


def private_leaks(text: str, private_context: Any) -> list[str]:
    if private_context is None:
        return []
    hint = _norm(text or "")
    out = []
    for path, value in _strings(private_context):
        norm = _norm(value)
        if len(norm.replace(" ", "")) >= PRIVATE_MIN_CHARS and norm in hint:
            out.append(path)
    return out


def audit_hint(
    text: str,
    *,
    level: Any = 1,
    private_context: Any = None,
    feedback: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    text = text if isinstance(text, str) else ""
    stripped = text.strip()
    errors: list[str] = []
    leak_paths: list[str] = []
    if not stripped:
        errors.append("hint_empty")
    if len(stripped) > MAX_HINT_CHARS:
        errors.append("hint_too_long")
    if type(level) is not int or level not in VALID_LEVELS:
        errors.append("hint_level_invalid")
    if verdict_words(stripped):
        errors.append("binary_verdict_leak")
    leaks = private_leaks(stripped, private_context)
    if leaks:
        errors.append("private_value_leak")
        leak_paths.extend(leaks)
    if feedback is not None and stripped:
        rejection = revision_rejection(text, feedback)
        if rejection:
            errors.append(rejection)
    return {
        "schema_version": AUDIT_SCHEMA,
        "passed": not errors,
        "hint_level": level,
        "hint_chars": len(stripped),
        "hint_sha256": hint_sha256(text),
        "errors": errors,
        "leak_paths": leak_paths,
        "reason": errors[0] if errors else "",
    }


def driver_audit(audit: Mapping[str, Any]) -> dict[str, Any]:
    """The audit dict as stored in ``hint-proposals.json`` (without the display-only ``reason``)."""
    return {k: v for k, v in audit.items() if k != "reason"}
