"""Scripted completions whose token ids agree with the tiny tokenizer.

A completion is a list of *segments*: reasoning text, content text, a tool call,
and special markup ids (``<think>``, ``</think>``, ``<tool_call>``, EOS). Text
segments are ``tiny.encode(text)``, so joining every streamed ``token_ids`` gives
exactly the ids the same text encodes to, and each chunk's text is the UTF-8 of
its tokens' bytes (incomplete multi-byte characters are held back to the next
chunk, as vLLM's incremental detokenizer does).

The prompt side mirrors the Qwen chat template closely enough for the token
inspector: ``<|im_start|>role\\n … <|im_end|>\\n`` per message, each image as
``<|vision_start|>`` + N × ``<|image_pad|>`` + ``<|vision_end|>`` (N = one per
32×32 px for qwen3_5, 28×28 for the 151k family), then the generation prompt.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
from PIL import Image

from eviscene_tui.tokens.bytelevel import BYTE_DECODER
from eviscene_tui.scaffold.tiny import SPECIAL_TOKENS, encode, special_id, tiny_tokenizer


@lru_cache(maxsize=4)
def token_bytes_table(family: str) -> dict[int, bytes]:
    """id -> raw bytes of the token (special tokens -> their literal text)."""
    table: dict[int, bytes] = {}
    for piece, tid in tiny_tokenizer(family).get_vocab(with_added_tokens=True).items():
        try:
            table[tid] = bytes(BYTE_DECODER[c] for c in piece)
        except KeyError:
            table[tid] = piece.encode()
    for name in SPECIAL_TOKENS:
        table[special_id(name, family)] = name.encode()
    return table


@dataclass
class Segment:
    kind: str  # "reasoning" | "content" | "tool" | "markup"
    ids: list[int]
    tool_index: int = 0
    tool_name: str = ""
    tool_arguments: str = ""


@dataclass
class ChunkPlan:
    token_ids: list[int]
    reasoning: str = ""
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    held_back: bool = False  # a parser held text back: nothing but ids


def _filler(n_tokens: int, family: str) -> str:
    base = (
        "We should check the source of the photo and verify the claim with a reverse image search because "
        "the caption does not match the location or the date of the event. "
    )
    per = max(1, len(encode(base * 4, family)) // 4)
    reps = n_tokens // per + 2
    ids = encode(base * reps, family)
    while len(ids) < n_tokens:
        reps *= 2
        ids = encode(base * reps, family)
    ids = ids[:n_tokens]
    return tiny_tokenizer(family).decode(ids)


def tool_call_markup(name: str, arguments: dict[str, Any]) -> str:
    """The qwen3_coder / qwen3_xml body between ``<tool_call>`` and ``</tool_call>``."""
    parts = [f"\n<function={name}>\n"]
    for key, value in arguments.items():
        v = value if isinstance(value, str) else orjson.dumps(value).decode()
        parts.append(f"<parameter={key}>\n{v}\n</parameter>\n")
    parts.append("</function>\n")
    return "".join(parts)


def build_segments(scenario: dict[str, Any], family: str, *, prompt_think: bool) -> list[Segment]:
    """Segments for the scripted completion.

    ``prompt_think``: the template already put ``<think>\\n`` in the prompt
    (Qwen3.5 style), so only ``</think>`` is generated.
    """
    reasoning = scenario.get("reasoning", "")
    content = scenario.get("content", "")
    if scenario.get("content_tokens"):
        content = _filler(int(scenario["content_tokens"]), family)
    if scenario.get("reasoning_tokens"):
        reasoning = _filler(int(scenario["reasoning_tokens"]), family)
    segs: list[Segment] = []
    if reasoning:
        if not prompt_think:
            segs.append(Segment("markup", [special_id("<think>", family)]))
        segs.append(Segment("reasoning", encode(reasoning, family)))
        segs.append(Segment("markup", [special_id("</think>", family)]))
    if content:
        segs.append(Segment("content", encode(content, family)))
    for i, call in enumerate(scenario.get("tool_calls") or ()):
        name = str(call.get("name", "tool"))
        args = call.get("arguments") or {}
        body = encode(tool_call_markup(name, args), family)
        ids = [special_id("<tool_call>", family)] + body + [special_id("</tool_call>", family)]
        segs.append(Segment("tool", ids, tool_index=i, tool_name=name, tool_arguments=orjson.dumps(args).decode()))
    segs.append(Segment("markup", [special_id("<|im_end|>", family)]))
    return segs


#: one streamed id: (token id, the segment it belongs to, its position in the segment)
_Flat = tuple[int, Segment, int]
#: (id(segment), position) -> the tool-call fragment sent with that token
_Fragments = dict[tuple[int, int], dict[str, Any]]


def plan_chunks(
    segments: list[Segment],
    family: str,
    *,
    tokens_per_chunk: int = 1,
    max_tokens: int | None = None,
    drop_held_back: bool = False,
    request_id: str = "0",
) -> tuple[list[ChunkPlan], int, str]:
    """Split the completion into chunks.

    Returns (chunks, total generated ids, finish_reason). With ``drop_held_back``
    (vLLM 0.11 bug #27482) chunks where the tool parser held text back are not
    sent at all, so their token ids are lost.
    """
    table = token_bytes_table(family)
    flat, finish = _flatten(segments, max_tokens)
    frag_at = _tool_fragments(segments, request_id)
    chunks: list[ChunkPlan] = []
    pend = {"reasoning": b"", "content": b""}  # bytes of an incomplete UTF-8 character, per channel
    tpc = max(1, int(tokens_per_chunk))
    for start in range(0, len(flat), tpc):
        chunks.append(_chunk(flat[start:start + tpc], table, frag_at, pend))
    # flush any held bytes (invalid tail) into the last chunk
    for kind in ("reasoning", "content"):
        if pend[kind] and chunks:
            setattr(chunks[-1], kind, getattr(chunks[-1], kind) + pend[kind].decode("utf-8", errors="replace"))
    if drop_held_back:
        chunks = [c for i, c in enumerate(chunks) if not c.held_back or i == len(chunks) - 1]
    return chunks, len(flat), finish


def _flatten(segments: list[Segment], max_tokens: int | None) -> tuple[list[_Flat], str]:
    """Every generated id in order, cut at ``max_tokens``, and the finish reason."""
    flat = [(tid, seg, pos) for seg in segments for pos, tid in enumerate(seg.ids)]
    finish = "tool_calls" if any(s.kind == "tool" for s in segments) else "stop"
    if max_tokens is not None and max_tokens >= 0 and len(flat) > max_tokens:
        return flat[:max_tokens], "length"
    return flat, finish


def _tool_fragments(segments: list[Segment], request_id: str) -> _Fragments:
    """Where each tool call's fragments go: the header at position min(3, len-2), the
    arguments spread over the positions after it."""
    frag_at: _Fragments = {}
    for seg in segments:
        if seg.kind == "tool":
            _place_tool_call(seg, request_id, frag_at)
    return frag_at


def _place_tool_call(seg: Segment, request_id: str, frag_at: _Fragments) -> None:
    n = len(seg.ids)
    hdr = min(3, max(0, n - 2))
    frag_at[(id(seg), hdr)] = {
        "index": seg.tool_index,
        "id": f"chatcmpl-tool-{request_id}-{seg.tool_index}",
        "type": "function",
        "function": {"name": seg.tool_name, "arguments": ""},
    }
    slots = list(range(hdr + 1, n)) or [hdr]
    args = seg.tool_arguments
    k = min(len(slots), max(1, len(args) // 6))
    step = math.ceil(len(args) / k) if args else 0
    for j in range(k):
        piece = args[j * step:(j + 1) * step]
        if not piece:
            continue
        key = (id(seg), slots[min(len(slots) - 1, (j * len(slots)) // k)])
        if key in frag_at:
            frag_at[key]["function"]["arguments"] += piece
        else:
            frag_at[key] = {"index": seg.tool_index, "function": {"arguments": piece}}


def _chunk(group: list[_Flat], table: dict[int, bytes], frag_at: _Fragments, pend: dict[str, bytes]) -> ChunkPlan:
    """One chunk of ``group``'s ids: the text they complete (an incomplete UTF-8 character
    waits in ``pend`` for the next chunk) and the tool-call fragments they carry."""
    plan = ChunkPlan(token_ids=[g[0] for g in group])
    texts = {"reasoning": b"", "content": b""}
    tools: list[dict[str, Any]] = []
    for tid, seg, pos in group:
        if seg.kind in texts:
            texts[seg.kind] += table.get(tid, b"")
        elif seg.kind == "tool" and (frag := frag_at.get((id(seg), pos))) is not None:
            tools.append(orjson.loads(orjson.dumps(frag)))
    for kind in ("reasoning", "content"):
        text, pend[kind] = _utf8_prefix(pend[kind] + texts[kind])
        setattr(plan, kind, text)
    plan.tool_calls = _merge_tool_frags(tools)
    if not plan.reasoning and not plan.content and not plan.tool_calls:
        plan.held_back = any(seg.kind == "tool" for _, seg, _ in group)
    return plan


def _merge_tool_frags(frags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for f in frags:
        cur = out.get(f["index"])
        if cur is None:
            out[f["index"]] = f
        else:
            cur["function"]["arguments"] = cur["function"].get("arguments", "") + f["function"].get("arguments", "")
    return list(out.values())


def _utf8_prefix(data: bytes) -> tuple[str, bytes]:
    if not data:
        return "", b""
    try:
        return data.decode("utf-8"), b""
    except UnicodeDecodeError:
        pass
    for cut in range(1, 4):
        try:
            return data[:-cut].decode("utf-8"), data[-cut:]
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace"), b""


# --------------------------------------------------------------------------- prompt template


def image_pad_count(data_url: str, family: str) -> int:
    """One pad per merged patch: 32x32 px (qwen3_5) or 28x28 px (151k family)."""
    side = 32 if family == "qwen3_5" else 28
    try:
        header, b64 = data_url.split(",", 1)
        raw = base64.b64decode(b64)
        with Image.open(io.BytesIO(raw)) as im:
            w, h = im.size
        return max(1, math.ceil(w / side) * math.ceil(h / side))
    except (ValueError, OSError, Image.DecompressionBombError):  # not a decodable image: a small fixed pad count
        return 4


def template_prompt_ids(
    messages: list[dict[str, Any]],
    family: str,
    *,
    tools: list[Any] | None = None,
    add_generation_prompt: bool = True,
    prompt_think: bool = False,
    thinking: bool = True,
    expand_images: bool = True,
) -> list[int]:
    ims, ime = special_id("<|im_start|>", family), special_id("<|im_end|>", family)
    ids: list[int] = []
    for msg in _with_tools(messages, tools):
        ids.append(ims)
        ids += encode(f"{msg.get('role', 'user')}\n", family)
        ids += _content_ids(msg.get("content"), family, expand_images=expand_images)
        ids.append(ime)
        ids += encode("\n", family)
    if add_generation_prompt:
        ids += _generation_prompt(family, prompt_think=prompt_think, thinking=thinking)
    return ids


def _with_tools(messages: list[dict[str, Any]], tools: list[Any] | None) -> list[dict[str, Any]]:
    """The messages with the tools listed in the system message (one made if none leads)."""
    msgs = list(messages)
    if not tools:
        return msgs
    tools_text = "# Tools\n" + "\n".join(orjson.dumps(t).decode() for t in tools)
    if msgs and msgs[0].get("role") == "system" and isinstance(msgs[0].get("content"), str):
        msgs[0] = {"role": "system", "content": msgs[0]["content"] + "\n\n" + tools_text}
    else:
        msgs.insert(0, {"role": "system", "content": tools_text})
    return msgs


def _content_ids(content: Any, family: str, *, expand_images: bool) -> list[int]:
    """A message's content: its text, each image as vision_start + pads + vision_end."""
    if isinstance(content, str):
        return encode(content, family)
    if not isinstance(content, list):
        return []
    vs, ve, pad = special_id("<|vision_start|>", family), special_id("<|vision_end|>", family), special_id("<|image_pad|>", family)
    ids: list[int] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            ids += encode(str(part.get("text", "")), family)
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            n = image_pad_count(url, family) if expand_images else 1
            ids += [vs] + [pad] * n + [ve]
    return ids


def _generation_prompt(family: str, *, prompt_think: bool, thinking: bool) -> list[int]:
    """The assistant header; with ``prompt_think`` the template opens ``<think>`` (and
    closes it at once when thinking is off)."""
    ids = [special_id("<|im_start|>", family)] + encode("assistant\n", family)
    if prompt_think:
        ids.append(special_id("<think>", family))
        ids += encode("\n", family)
        if not thinking:
            ids += encode("\n", family)
            ids.append(special_id("</think>", family))
            ids += encode("\n\n", family)
    return ids
