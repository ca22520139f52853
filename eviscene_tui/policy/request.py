"""The hinted teacher request: rebuilt from the failure step's archived request.

Source of the request, best first:
1. the runtime archive (``context/req-NNNNNN.json`` + ``artifacts/sha256/…``) via
   :meth:`RuntimeStore.reconstruct_request`;
2. the step's ``metadata.policy_input`` (images restored from the store when it exists).

A request whose images cannot be restored is *blocked*: sending it without the
image would not be the request the failing step saw.

Hint placement — THE one rule, applied only by :func:`apply_hint`:

- ``as_run`` (default): the way this run's driver did it, learned from one of the run's
  own hinted teacher requests (``policy/hint_template.py``: a new message, or text
  before / after a message's text, with the driver's own words around the hint); when
  the run has no hinted request to learn from, ``user_suffix``;
- ``user_suffix``: the hint is appended to the **last user message**
  as its own text part (or to its text when the content is a string), delimited as::

      \\n\\n--- Repair hint ---\\n<hint text, stripped>\\n--- end of repair hint ---

- ``system_suffix``: the same block appended to the system prompt;
- ``user_prefix``: the block (without the leading blank line, with a trailing
  one) put before the first text of the last user message.

Choose with ``[policy] hint_placement`` in the config file. :attr:`TeacherRequest.hint_location`
says where the hint went (message index, part index, char offset, length) so the
token inspector can highlight it.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from eviscene_tui.artifacts.runtime_archive import ArchivedRequest
from eviscene_tui.policy.hint_template import HintTemplate, apply_template
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.settings import HINT_PLACEMENTS
AS_RUN_FALLBACK = "user_suffix"
HINT_OPEN = "--- Repair hint ---"
HINT_CLOSE = "--- end of repair hint ---"

# generation-config keys forwarded to vLLM (archived name -> request name)
_GEN_KEYS = {
    "max_tokens": "max_tokens",
    "max_output_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "repetition_penalty": "repetition_penalty",
    "seed": "seed",
    "stop": "stop",
    "stop_token_ids": "stop_token_ids",
    "chat_template_kwargs": "chat_template_kwargs",
    "thinking_token_budget": "thinking_token_budget",
    "tool_choice": "tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
}


class RequestUnavailable(Exception):
    """The failure step's request cannot be rebuilt faithfully (message says why)."""


@dataclass(frozen=True)
class ImageInfo:
    sha256: str
    mime: str
    size_bytes: int
    width: int | None = None
    height: int | None = None

    def placeholder(self) -> str:
        dims = f" {self.width}x{self.height}" if self.width and self.height else ""
        return f"<image sha256={self.sha256} {self.mime} {self.size_bytes} bytes{dims}>"

    def to_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "mime": self.mime, "size_bytes": self.size_bytes, "width": self.width, "height": self.height}


@dataclass
class TeacherRequest:
    """The exact request to send (messages include the system prompt and the hint)."""

    messages: list[dict[str, Any]]
    tools: list[Any] | None = None
    response_format: Any = None
    generation: dict[str, Any] = field(default_factory=dict)
    images: list[ImageInfo] = field(default_factory=list)
    source: str = "archive"  # archive | policy_input
    request_id: str | None = None
    store_path: str | None = None
    step_index: int | None = None
    round_index: int | None = None
    hint: str | None = None
    hint_placement: str = "user_suffix"  # the rule asked for (as_run, user_suffix, ...)
    hint_location: dict[str, Any] | None = None  # where the hint went; its "placement" is the rule applied
    problems: list[str] = field(default_factory=list)
    hint_template: HintTemplate | None = None  # learned from the run (placement as_run)

    def hint_where(self) -> str:
        """Where the hint is in :attr:`messages`, for people (the location dict is for code)."""
        loc = self.hint_location
        if not loc:
            return "no hint"
        at = f"message {loc.get('message_index')} ({loc.get('role')})"
        if loc.get("mode") == "new_message":
            at = "new " + at
        if loc.get("part_index") is not None:
            at += f", text part {loc['part_index']}"
        start = int(loc.get("char_offset") or 0)
        return f"{at}, characters {start}-{start + int(loc.get('length') or 0)}"

    def hint_rule(self) -> str:
        """One line for the operator: which rule put the hint where."""
        applied = (self.hint_location or {}).get("placement")
        if self.hint_placement != "as_run":
            return f"{self.hint_placement} (configured)"
        if applied == "as_run" and self.hint_template is not None:
            return f"as in this run ({self.hint_template.evidence}): {self.hint_template.describe()}"
        if self.hint_template is not None:
            return f"{AS_RUN_FALLBACK}: the rule learned from this run ({self.hint_template.evidence}) has no place in this request"
        return f"{AS_RUN_FALLBACK}: no hinted teacher request of this run shows the driver's placement unambiguously"

    def origin(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "context_request_id": self.request_id,
            "runtime_store_path": self.store_path,
            "source_step_index": self.step_index,
            "round_index": self.round_index,
        }


# ---------------------------------------------------------------------------- hint


def hint_block(hint: str, placement: str) -> str:
    body = f"{HINT_OPEN}\n{hint.strip()}\n{HINT_CLOSE}"
    return f"{body}\n\n" if placement == "user_prefix" else f"\n\n{body}"


def apply_hint(
    messages: list[dict[str, Any]], hint: str | None, placement: str = "user_suffix", template: HintTemplate | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Insert ``hint`` by the documented rule; returns (new messages, location).

    ``template`` is the rule learned from the run, used by ``as_run``. The input list is
    not modified."""
    if placement not in HINT_PLACEMENTS:
        raise ValueError(f"unknown hint placement {placement!r}; expected one of {', '.join(HINT_PLACEMENTS)}")
    if hint is None or not hint.strip():
        return copy.deepcopy(messages), None
    if placement == "as_run":
        learned = apply_template(messages, hint, template) if template is not None else None
        if learned is not None:
            return learned
        placement = AS_RUN_FALLBACK
    msgs = copy.deepcopy(messages)
    block = hint_block(hint, placement)
    if placement == "system_suffix":
        idx = next((i for i, m in enumerate(msgs) if m.get("role") == "system"), None)
        if idx is None:
            msgs.insert(0, {"role": "system", "content": ""})
            idx = 0
            block = block.lstrip("\n")
        return msgs, _append_text(msgs, idx, block, prefix=False, placement=placement)
    idx = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].get("role") == "user"), None)
    if idx is None:
        msgs.append({"role": "user", "content": ""})
        idx = len(msgs) - 1
        block = block.strip("\n")
    return msgs, _append_text(msgs, idx, block, prefix=placement == "user_prefix", placement=placement)


def _append_text(msgs: list[dict[str, Any]], idx: int, block: str, *, prefix: bool, placement: str) -> dict[str, Any]:
    msg = msgs[idx]
    content = msg.get("content")
    loc: dict[str, Any] = {"placement": placement, "message_index": idx, "role": msg.get("role"), "length": len(block)}
    if content is None or isinstance(content, str):
        text = content or ""
        if prefix:
            msg["content"] = block + text
            loc.update(part_index=None, char_offset=0)
        else:
            msg["content"] = text + block
            loc.update(part_index=None, char_offset=len(text))
        return loc
    if isinstance(content, list):
        if prefix:
            first_text = next((j for j, p in enumerate(content) if isinstance(p, dict) and p.get("type") == "text"), None)
            if first_text is None:
                content.insert(0, {"type": "text", "text": block})
                loc.update(part_index=0, char_offset=0)
            else:
                content[first_text]["text"] = block + str(content[first_text].get("text", ""))
                loc.update(part_index=first_text, char_offset=0)
        else:
            content.append({"type": "text", "text": block})
            loc.update(part_index=len(content) - 1, char_offset=0)
        return loc
    # unknown content shape: wrap it
    msg["content"] = [{"type": "text", "text": orjson.dumps(content).decode()}, {"type": "text", "text": block}]
    loc.update(part_index=1, char_offset=0)
    return loc


# ---------------------------------------------------------------------------- from the archive


def _has_image_ref(node: Any, depth: int = 0) -> bool:
    if depth > 64:
        return False
    if isinstance(node, dict):
        if node.get("type") in ("image_ref", "image_reference", "media_ref"):
            return True
        return any(_has_image_ref(v, depth + 1) for v in node.values())
    if isinstance(node, list):
        return any(_has_image_ref(v, depth + 1) for v in node)
    return False


def _payload_messages(payload: Any) -> list[dict[str, Any]]:
    """Turn an archived ``input_payload`` into chat messages (after the system prompt)."""
    if isinstance(payload, dict) and isinstance(payload.get("messages"), list):
        payload = payload["messages"]
    if isinstance(payload, list) and payload and all(isinstance(m, dict) and "role" in m for m in payload):
        return [dict(m) for m in payload]
    if isinstance(payload, str):
        return [{"role": "user", "content": payload}]
    if payload is None:
        return []
    # another JSON shape: one user message with the JSON text plus its images as parts
    images: list[dict[str, Any]] = []

    def strip(node: Any, depth: int = 0) -> Any:
        if depth > 64:
            return node
        if isinstance(node, dict):
            if node.get("type") == "image_url":
                images.append(node)
                return {"type": "image", "index": len(images) - 1}
            return {k: strip(v, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [strip(v, depth + 1) for v in node]
        return node

    text = orjson.dumps(strip(payload), option=orjson.OPT_SORT_KEYS).decode()
    return [{"role": "user", "content": [{"type": "text", "text": text}, *images]}]


def archived_messages(archived: ArchivedRequest, *, image_refs: bool = False) -> list[dict[str, Any]]:
    """The chat messages of an ``ArchivedRequest``: its system prompt, then its input
    payload; images restored as data URLs, or kept as their archived refs (``image_refs``,
    for comparing requests without their image bytes)."""
    messages: list[dict[str, Any]] = []
    if archived.system_prompt:
        messages.append({"role": "system", "content": str(archived.system_prompt)})
    payload = archived.input_payload_refs if image_refs else None
    if payload is None:
        payload = archived.input_payload
    return messages + _payload_messages(payload)


def teacher_request_from_archived(
    archived: ArchivedRequest,
    *,
    hint: str | None,
    placement: str = "user_suffix",
    step_index: int | None = None,
    round_index: int | None = None,
    problems: list[str] | None = None,
    template: HintTemplate | None = None,
) -> TeacherRequest:
    """Build the TeacherRequest from an ``ArchivedRequest`` (the runtime archive's dataclass).

    Raises :class:`RequestUnavailable` when an image could not be restored."""
    probs = list(problems or [])
    if _has_image_ref(archived.input_payload):
        raise RequestUnavailable(
            "an archived image of the failure step's request is missing or does not match its sha256; "
            "the request cannot be rebuilt faithfully (see the integrity problems)"
        )
    messages = archived_messages(archived)
    if not messages:
        raise RequestUnavailable("the archived request has neither a system prompt nor an input payload")
    msgs, loc = apply_hint(messages, hint, placement, template)
    images = []
    for img in archived.images:
        images.append(ImageInfo(sha256=img.sha256, mime=img.mime, size_bytes=img.size_bytes, width=img.width, height=img.height))
    tools = list(archived.tool_schemas) or None
    store = archived.store_path
    return TeacherRequest(
        messages=msgs,
        tools=tools,
        response_format=archived.response_format,
        generation=dict(archived.generation_config),
        images=images,
        source=archived.source,
        request_id=archived.request_id,
        store_path=str(store) if store is not None else None,
        step_index=step_index,
        round_index=round_index,
        hint=hint.strip() if hint and hint.strip() else None,
        hint_placement=placement,
        hint_location=loc,
        problems=probs,
        hint_template=template,
    )


def with_hint(req: TeacherRequest, hint: str | None, placement: str | None = None) -> TeacherRequest:
    """The same request with a different hint (removes the previous one first)."""
    base = [copy.deepcopy(m) for m in req.messages]
    if req.hint_location is not None:
        base = _remove_hint(base, req.hint_location)
    pl = placement or req.hint_placement
    msgs, loc = apply_hint(base, hint, pl, req.hint_template)
    new = copy.copy(req)
    new.messages, new.hint_location, new.hint_placement = msgs, loc, pl
    new.hint = hint.strip() if hint and hint.strip() else None
    return new


def _remove_hint(msgs: list[dict[str, Any]], loc: dict[str, Any]) -> list[dict[str, Any]]:
    i, part, off, n = loc["message_index"], loc.get("part_index"), loc.get("char_offset", 0), loc["length"]
    if i >= len(msgs):
        return msgs
    msg = msgs[i]
    if loc.get("mode") == "new_message":
        msgs.pop(i)
        return msgs
    if part is None:
        text = msg.get("content") or ""
        msg["content"] = text[:off] + text[off + n:]
        if not msg["content"] and loc.get("placement") == "system_suffix" and i == 0:
            msgs.pop(0)
    else:
        content = msg.get("content") or []
        if part < len(content):
            t = str(content[part].get("text", ""))
            rest = t[:off] + t[off + n:]
            if rest:
                content[part]["text"] = rest
            else:
                content.pop(part)
    return msgs


# ---------------------------------------------------------------------------- wire body


def chat_body(req: TeacherRequest, config: PolicyConfig, *, model: str) -> dict[str, Any]:
    """The ``/v1/chat/completions`` body (streaming, with token ids and usage).

    ``temperature`` always comes from the config (default 0.7, as the driver);
    other archived generation settings are forwarded, ``logprobs`` / ``top_logprobs``
    included when the config does not ask for them itself."""
    body: dict[str, Any] = {"model": model, "messages": req.messages}
    if req.tools:
        body["tools"] = req.tools
    if req.response_format is not None:
        body["response_format"] = req.response_format
    for key, value in (req.generation or {}).items():
        target = _GEN_KEYS.get(key)
        if target and value is not None:
            body[target] = value
    if config.max_tokens is not None:
        body["max_tokens"] = config.max_tokens
    body["temperature"] = config.temperature
    body["stream"] = True
    body["return_token_ids"] = True
    body["stream_options"] = {"include_usage": True}
    # logprobs as the config asks, else as the failure step's archived generation config did
    gen = req.generation or {}
    archived_top = gen.get("top_logprobs")
    archived_top = archived_top if isinstance(archived_top, int) and not isinstance(archived_top, bool) and archived_top > 0 else 0
    top = int(config.top_logprobs) or archived_top
    if config.logprobs or top or gen.get("logprobs") is True:
        body["logprobs"] = True
        if top:
            body["top_logprobs"] = top
        if config.return_tokens_as_token_ids:
            body["return_tokens_as_token_ids"] = True
    return body


_PLACEHOLDERS: dict[str, str] = {}  # data URL (+ known shas) -> placeholder; hashing a big image once


def _image_placeholder_for_url(url: str, known: dict[str, ImageInfo]) -> str:
    key = url if not known else url + "|" + ",".join(sorted(known))
    cached = _PLACEHOLDERS.get(key)
    if cached is not None:
        return cached
    text = _placeholder_uncached(url, known)
    if len(_PLACEHOLDERS) > 64:
        _PLACEHOLDERS.clear()
    _PLACEHOLDERS[key] = text
    return text


def _placeholder_uncached(url: str, known: dict[str, ImageInfo]) -> str:
    if not url.startswith("data:"):
        return f"<image url {url[:80]}>"
    header, _, b64 = url.partition(",")
    try:
        raw = base64.b64decode(b64, validate=False)
    except (ValueError, TypeError):
        return f"<image: undecodable data URL, {len(b64)} base64 chars>"
    sha = hashlib.sha256(raw).hexdigest()
    info = known.get(sha)
    if info is not None:
        return info.placeholder()
    mime = header[5:].split(";", 1)[0] or "?"
    return ImageInfo(sha, mime, len(raw)).placeholder()


def redact_images(body: Any, images: list[ImageInfo] | None = None) -> Any:
    """A copy of ``body`` with every data-URL image replaced by a placeholder
    ``<image sha256=… mime N bytes WxH>`` (what records keep and what the operator sees)."""
    known = {i.sha256: i for i in images or ()}

    def walk(node: Any, depth: int = 0) -> Any:
        if depth > 64:
            return node
        if isinstance(node, dict):
            if node.get("type") == "image_url" and isinstance(node.get("image_url"), dict):
                url = str(node["image_url"].get("url", ""))
                return {"type": "image_url", "image_url": {"url": _image_placeholder_for_url(url, known)}}
            return {k: walk(v, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, depth + 1) for v in node]
        return node

    return walk(body)


def describe_request(body: dict[str, Any], images: list[ImageInfo] | None = None) -> str:
    """The exact request as indented JSON, images as placeholders (raw text:
    pass it through ``safe_text`` before display)."""
    return orjson.dumps(redact_images(body, images), option=orjson.OPT_INDENT_2).decode()
