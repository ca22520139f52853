"""A tiny byte-level tokenizer that speaks the Qwen special-token ids.

Used by ``sample_runs`` (so captured ids decode to real text), by the fake vLLM
server (so streamed ``token_ids`` are consistent with its text) and by tests
(no model hub: the tokenizer is built here, deterministically).

Layout of the vocabulary:
- ids ``0..255``: one token per byte (GPT-2 byte-level alphabet);
- ids ``256..``: a few whole-word merges of common English words, so text is not
  always one token per byte;
- the Qwen special tokens at their real ids for the chosen family
  (``qwen3_5``: 248044..248069, ``qwen2_5_vl`` / ``qwen3_vl``: 151643..151668).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from tokenizers import Tokenizer

from eviscene_tui.tokens.bytelevel import byte_alphabet

# name -> (qwen3_5 id, qwen2.5-vl/qwen3-vl id, special?)
SPECIAL_TOKENS: dict[str, tuple[int, int, bool]] = {
    "<|endoftext|>": (248044, 151643, True),
    "<|im_start|>": (248045, 151644, True),
    "<|im_end|>": (248046, 151645, True),
    "<|vision_start|>": (248053, 151652, True),
    "<|vision_end|>": (248054, 151653, True),
    "<|vision_pad|>": (248055, 151654, True),
    "<|image_pad|>": (248056, 151655, True),
    "<|video_pad|>": (248057, 151656, True),
    "<think>": (248068, 151667, False),
    "</think>": (248069, 151668, False),
    "<tool_call>": (248058, 151657, False),
    "</tool_call>": (248059, 151658, False),
}

FAMILIES = ("qwen3_5", "qwen2_5_vl")

_WORDS = (
    " the", " a", " to", " of", " and", " is", " in", " that", " it", " for", " on", " with", " as",
    " image", " search", " result", " results", " step", " tool", " call", " verify", " source",
    " claim", " photo", " event", " location", " date", " match", " no", " not", " check",
    " reverse", " query", " caption", " evidence", " real", " fake", " verdict", " because",
    " The", " I", " We", " should", " will", " this", " was", " were", " from", " by",
    "The", "I", "{\"", "\":", "\",", "\"}", " \"", "name", "arguments", "query", "url",
)


def _to_byte_level(text: str) -> str:
    alphabet = byte_alphabet()
    return "".join(alphabet[b] for b in text.encode("utf-8"))


def _merges_for(word_bl: str, vocab: dict[str, int], merges: list[tuple[str, str]]) -> None:
    """Add left-to-right merges that build ``word_bl`` from its characters."""
    current = word_bl[0]
    for ch in word_bl[1:]:
        merged = current + ch
        if merged not in vocab:
            vocab[merged] = len(vocab)
            merges.append((current, ch))
        current = merged


@lru_cache(maxsize=4)
def tiny_tokenizer_json(family: str = "qwen3_5") -> str:
    """The tokenizer.json text for ``family`` (deterministic)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown tokenizer family {family!r}; expected one of {FAMILIES}")
    column = 0 if family == "qwen3_5" else 1
    vocab: dict[str, int] = {ch: i for i, ch in enumerate(byte_alphabet())}
    merges: list[tuple[str, str]] = []
    for word in _WORDS:
        _merges_for(_to_byte_level(word), vocab, merges)
    added: list[dict[str, Any]] = [
        {
            "id": ids[column],
            "content": name,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": ids[2],
        }
        for name, ids in sorted(SPECIAL_TOKENS.items(), key=lambda kv: kv[1][column])
    ]
    # The added tokens must also sit in the model vocabulary at their ids, or the
    # library renumbers them after the last vocabulary id.
    for row in added:
        vocab[row["content"]] = row["id"]
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[a, b] for a, b in merges],
        },
    }
    return json.dumps(doc, ensure_ascii=False, indent=1, sort_keys=False)


@lru_cache(maxsize=4)
def tiny_tokenizer(family: str = "qwen3_5") -> Tokenizer:
    return Tokenizer.from_str(tiny_tokenizer_json(family))


def special_id(name: str, family: str = "qwen3_5") -> int:
    return SPECIAL_TOKENS[name][0 if family == "qwen3_5" else 1]


def encode(text: str, family: str = "qwen3_5") -> list[int]:
    """Encode text; special-token strings inside it map to their ids."""
    return list(tiny_tokenizer(family).encode(text, add_special_tokens=False).ids)


def decode(ids: list[int], family: str = "qwen3_5", *, skip_special_tokens: bool = False) -> str:
    return tiny_tokenizer(family).decode(list(ids), skip_special_tokens=skip_special_tokens)


def tokenizer_config(family: str = "qwen3_5", *, context_length: int = 131072) -> dict:
    """A ``tokenizer_config.json``-like dict, as vLLM's ``/tokenizer_info`` returns."""
    column = 0 if family == "qwen3_5" else 1
    added_decoder = {
        str(ids[column]): {"content": name, "special": ids[2], "lstrip": False, "rstrip": False, "normalized": False, "single_word": False}
        for name, ids in SPECIAL_TOKENS.items()
    }
    return {
        "tokenizer_class": "Qwen2TokenizerFast",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": context_length,
        "additional_special_tokens": [
            "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
        ],
        "added_tokens_decoder": added_decoder,
        "model_type": "qwen3_5" if family == "qwen3_5" else "qwen2_5_vl",
    }
