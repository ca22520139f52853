"""Chat rendering to Qwen3.5 token ids (through the tiny tokenizer) and token captures.

The prompt template is a compact Qwen-style chat template:

    <|im_start|>system\\n{system}\\n\\n# Tools\\n{one tool per line}<|im_end|>\\n
    <|im_start|>user\\n{text}<|vision_start|><|image_pad|>×N<|vision_end|><|im_end|>\\n
    <|im_start|>assistant\\n{thought}\\n<tool_call>\\n{json}\\n</tool_call><|im_end|>\\n
    <|im_start|>user\\n<tool_response>\\n{result}\\n</tool_response><|im_end|>\\n
    ...
    <|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n          (generation prompt, thinking off)

The teacher's hint is one extra user message ``Hint: …`` placed right before the
generation prompt of the anchor step (and kept there for the later teacher steps),
so the teacher prompt ids are the student prompt ids with one inserted span.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from functools import lru_cache
from typing import Any

from eviscene_tui.artifacts.jsonio import canonical_json_bytes
from eviscene_tui.scaffold.tiny import encode, special_id

IMAGE_PAD = special_id("<|image_pad|>")
VISION_START = special_id("<|vision_start|>")
VISION_END = special_id("<|vision_end|>")
IM_END = special_id("<|im_end|>")

# 128x96 image, Qwen3.5 vision: patch 16, spatial merge 2 -> grid_thw [1, 6, 8] -> 6*8/4 = 12 pads
IMAGE_WIDTH = 128
IMAGE_HEIGHT = 96
PATCH_SIZE = 16
MERGE_SIZE = 2
GRID_THW = [1, IMAGE_HEIGHT // PATCH_SIZE, IMAGE_WIDTH // PATCH_SIZE]
IMAGE_PADS = GRID_THW[0] * GRID_THW[1] * GRID_THW[2] // (MERGE_SIZE * MERGE_SIZE)
GEN_PROMPT = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
TOPK = 3


@lru_cache(maxsize=4096)
def _enc(text: str) -> tuple[int, ...]:
    return tuple(encode(text))


def enc(text: str) -> list[int]:
    return list(_enc(text))


def tool_call_text(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def system_ids(system_prompt: str, tools: list[dict[str, Any]]) -> list[int]:
    lines = [f"- {t['function']['name']}({', '.join(t['function']['parameters']['properties'])}): {t['function']['description']}" for t in tools]
    tools_text = ("\n\n# Tools\n" + "\n".join(lines)) if lines else ""
    return enc("<|im_start|>system\n" + system_prompt + tools_text + "<|im_end|>\n")


def message_ids(msg: dict[str, Any]) -> list[int]:
    role = msg["role"]
    if role == "tool":
        return enc("<|im_start|>user\n<tool_response>\n" + str(msg["content"]) + "\n</tool_response><|im_end|>\n")
    if role == "assistant":
        text = str(msg.get("content") or "")
        for call in msg.get("tool_calls") or []:
            fn = call["function"]
            text += "\n" + tool_call_text(fn["name"], json.loads(fn["arguments"]))
        return enc("<|im_start|>assistant\n" + text + "<|im_end|>\n")
    ids = enc(f"<|im_start|>{role}\n")
    content = msg["content"]
    if isinstance(content, str):
        ids += enc(content)
    else:
        for part in content:
            if part.get("type") == "text":
                ids += enc(part["text"])
            elif part.get("type") in ("image_ref", "image_url"):
                ids += [VISION_START] + [IMAGE_PAD] * IMAGE_PADS + [VISION_END]
    return ids + enc("<|im_end|>\n")


def prompt_ids(system_prompt: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[int]:
    ids = system_ids(system_prompt, tools)
    for m in messages:
        ids += message_ids(m)
    return ids + enc(GEN_PROMPT)


def completion_ids(text: str) -> list[int]:
    return enc(text) + [IM_END]


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(canonical_json_bytes(list(parts))).digest()[:8], "big")


def token_capture(
    prompt: list[int],
    completion: list[int],
    seed_key: str,
    *,
    status: str = "complete",
    missing: list[str] | None = None,
    topk: int = TOPK,
    pre_grammar: bool = False,
) -> dict[str, Any]:
    """A ``ifv-policy-token-capture-v1`` capture with deterministic logprobs and top-k."""
    rng = random.Random(_seed("capture", seed_key))
    logprobs: list[float] = []
    topk_rows: list[list[dict[str, Any]]] = []
    for tok in completion:
        lp = -round((rng.random() ** 4) * 3.0, 3)
        logprobs.append(lp)
        if topk:
            p0 = math.exp(lp)
            rest = [rng.random() for _ in range(topk - 1)]
            scale = (1.0 - p0) / (sum(rest) or 1.0)
            alts = sorted((r * scale for r in rest), reverse=True)
            ids = [tok]
            while len(ids) < topk:
                cand = rng.randrange(32, 420)
                if cand not in ids:
                    ids.append(cand)
            probs = [p0, *alts]
            total = sum(probs)
            topk_rows.append([{"token_id": i, "probability": round(p / total, 3)} for i, p in zip(ids, probs)])
    cap: dict[str, Any] = {
        "schema_version": "ifv-policy-token-capture-v1",
        "status": status,
        "prompt_token_ids": prompt,
        "completion_token_ids": completion,
        "completion_logprobs": logprobs,
        "completion_topk_by_position": topk_rows,
        "topk": topk,
        "missing": list(missing or []),
    }
    if pre_grammar:  # only when the (PSD raw-logprob gateway) response says so
        cap["teacher_logprob_semantics"] = "pre_grammar_unprocessed_v1"
    for name in missing or []:
        if name in cap and name.endswith(("_ids", "_logprobs")):
            cap.pop(name)
    return cap
