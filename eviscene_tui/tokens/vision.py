"""Vision token ids: which family a vocabulary belongs to, and how it was decided.

vllm-protocol §4: Qwen3.5 (248053/248054/248056/248057) vs Qwen2/2.5/3-VL
(151652/151653/151655/151656). The table is chosen from the tokenizer's own
added tokens (by name), from ``config.json`` / ``model_type``, or from
``/tokenizer_info`` — never from the model name. Only when none of these is
available is the family guessed from the prompt's framing (vision_start followed
by a pad), and the guess says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.fileio import read_regular
from eviscene_tui.artifacts.media import VISION_FAMILIES, family_for_model_type, family_from_ids

VISION_NAMES = {
    "<|vision_start|>": "vision_start",
    "<|vision_end|>": "vision_end",
    "<|vision_pad|>": "vision_pad",
    "<|image_pad|>": "image_pad",
    "<|video_pad|>": "video_pad",
}


# Other special ids of the two Qwen vocabularies (vllm-protocol §4), used to label
# tokens when no tokenizer or server is available but the family is known.
FAMILY_SPECIALS: dict[str, dict[int, str]] = {
    "qwen3_5": {248044: "<|endoftext|>", 248045: "<|im_start|>", 248046: "<|im_end|>", 248068: "<think>", 248069: "</think>"},
    "qwen2_5_vl": {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>", 151667: "<think>", 151668: "</think>"},
}


@dataclass(frozen=True)
class VisionIds:
    vision_start: int
    vision_end: int
    image_pad: int
    video_pad: int | None
    vision_pad: int | None
    family: str | None
    basis: str  # how it was decided, shown in the UI

    @property
    def pad_ids(self) -> frozenset[int]:
        return frozenset(i for i in (self.image_pad, self.video_pad) if i is not None)

    def name_of(self, token_id: int) -> str | None:
        for name, value in (
            ("<|vision_start|>", self.vision_start),
            ("<|vision_end|>", self.vision_end),
            ("<|image_pad|>", self.image_pad),
            ("<|video_pad|>", self.video_pad),
            ("<|vision_pad|>", self.vision_pad),
        ):
            if value == token_id:
                return name
        return None

    def family_special(self, token_id: int) -> str | None:
        """A vision name, or another special of the family's table (im_start, think, …)."""
        name = self.name_of(token_id)
        if name is None and self.family is not None:
            name = FAMILY_SPECIALS.get(self.family, {}).get(token_id)
        return name


def from_family(family: str, basis: str) -> VisionIds:
    t = VISION_FAMILIES[family]
    return VisionIds(
        vision_start=t["vision_start"],
        vision_end=t["vision_end"],
        image_pad=t["image_pad"],
        video_pad=t["video_pad"],
        vision_pad=t["vision_pad"],
        family=family,
        basis=basis,
    )


def _family_of_ids(ids: Mapping[str, int]) -> str | None:
    for fam, table in VISION_FAMILIES.items():
        if ids.get("image_pad") == table["image_pad"] and ids.get("vision_start") == table["vision_start"]:
            return fam
    return None


def from_added_tokens(added: Mapping[int, str], basis: str) -> VisionIds | None:
    """From an id -> content map of the tokenizer's added tokens."""
    found: dict[str, int] = {}
    for tid, content in added.items():
        key = VISION_NAMES.get(content)
        if key and key not in found:
            found[key] = int(tid)
    if not {"vision_start", "vision_end", "image_pad"} <= found.keys():
        return None
    return VisionIds(
        vision_start=found["vision_start"],
        vision_end=found["vision_end"],
        image_pad=found["image_pad"],
        video_pad=found.get("video_pad"),
        vision_pad=found.get("vision_pad"),
        family=_family_of_ids(found),
        basis=basis,
    )


def from_config(config: Mapping[str, Any], basis: str = "config.json") -> VisionIds | None:
    """From a model ``config.json`` (explicit ids first, then ``model_type``)."""
    ids = {
        "vision_start": config.get("vision_start_token_id"),
        "vision_end": config.get("vision_end_token_id"),
        "image_pad": config.get("image_token_id"),
        "video_pad": config.get("video_token_id"),
    }
    if all(isinstance(ids[k], int) for k in ("vision_start", "vision_end", "image_pad")):
        fam = _family_of_ids(ids)  # type: ignore[arg-type]  # checked int just above
        return VisionIds(
            vision_start=ids["vision_start"],  # type: ignore[arg-type]  # checked int just above
            vision_end=ids["vision_end"],  # type: ignore[arg-type]  # checked int just above
            image_pad=ids["image_pad"],  # type: ignore[arg-type]  # checked int just above
            video_pad=ids["video_pad"] if isinstance(ids["video_pad"], int) else None,
            vision_pad=VISION_FAMILIES[fam]["vision_pad"] if fam else None,
            family=fam,
            basis=f"{basis} token ids",
        )
    model_type = config.get("model_type")
    fam = family_for_model_type(model_type)
    if fam is None and isinstance(config.get("text_config"), Mapping):
        fam = family_for_model_type(config["text_config"].get("model_type"))
    if fam:
        return from_family(fam, f"{basis} model_type={model_type}")
    return None


def from_tokenizer_info(info: Mapping[str, Any]) -> VisionIds | None:
    """From vLLM's ``GET /tokenizer_info`` (``added_tokens_decoder``, then ``model_type``)."""
    added = info.get("added_tokens_decoder")
    if isinstance(added, Mapping):
        table: dict[int, str] = {}
        for key, row in added.items():
            try:
                tid = int(key)
            except (TypeError, ValueError):
                continue
            content = row.get("content") if isinstance(row, Mapping) else row
            if isinstance(content, str):
                table[tid] = content
        got = from_added_tokens(table, "/tokenizer_info added tokens")
        if got:
            return got
    fam = family_for_model_type(info.get("model_type"))
    if fam:
        return from_family(fam, f"/tokenizer_info model_type={info.get('model_type')}")
    return None


def from_model_dir(path: str | os.PathLike[str]) -> VisionIds | None:
    """From ``<dir>/config.json`` of a local model folder."""
    p = Path(path)
    cfg = p / "config.json" if p.is_dir() else p.parent / "config.json"
    try:
        data = orjson.loads(read_regular(cfg))
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    return from_config(data, basis=f"{cfg.name}")


def guess_from_ids(ids: Iterable[int], *, enough: int = 3) -> VisionIds | None:
    """The family whose ``vision_start`` is followed by its pad in ``ids``. On a list, the
    first ``enough`` framings decide (a 1,000,000-id prompt is not scanned to its end)."""
    if not isinstance(ids, list):
        fam = family_from_ids(ids)
        return from_family(fam, "guessed from vision_start/pad framing in the ids") if fam else None
    n = len(ids)
    best, best_count = None, 0
    for name, table in VISION_FAMILIES.items():
        vs = table["vision_start"]
        pads = (table["image_pad"], table["video_pad"])
        count = seen = pos = 0
        while seen < enough:
            try:
                i = ids.index(vs, pos)
            except ValueError:
                break
            seen += 1
            if i + 1 < n and ids[i + 1] in pads:
                count += 1
            pos = i + 1
        if count > best_count:
            best, best_count = name, count
        if count >= enough:
            break  # this family's framing, again and again: no need to scan for the other
    return from_family(best, "guessed from vision_start/pad framing in the ids") if best else None
