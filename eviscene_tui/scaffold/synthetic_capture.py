"""Synthetic cases with token captures, for tests and benchmarks (Textual-free).

:func:`synthetic_case` builds a stand-in for a case bundle (a ``tokens.sources.CaptureCase``:
``trace()``, ``rounds[i].attempts``, ``rounds[i].dir``, ``root``, ``case_id``: what the token
sources read) with one source step capture and one attempt whose student and teacher prompts
differ by a hint, an image-pad run, logprobs, top-k and a v3 ``psd_media`` whose image is
written to ``<run_dir>/media/<sha>.image``.
:func:`big_case` gives a capture of any size (1,000,000 ids for the benchmark).
"""

from __future__ import annotations

import hashlib
import io
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from eviscene_tui.artifacts.models import AttemptRecord
from eviscene_tui.artifacts.problems import Problem
from eviscene_tui.artifacts.trace import SourceTrace
from eviscene_tui.scaffold import tiny

HINT = "search the caption text before judging the photo."
HINT_TEXT = "\nHint: " + HINT  # what the teacher prompt holds (framing + the hint)


@dataclass
class SyntheticRound:
    index: int
    dir: Path
    attempts: list[AttemptRecord]


@dataclass
class SyntheticCase:
    trace_obj: SourceTrace | None  # None: a case whose source trace cannot be read
    rounds: list[SyntheticRound] = field(default_factory=list)
    root: Path | None = None
    case_id: str | None = None

    def trace(self) -> tuple[SourceTrace | None, list[Problem]]:
        return self.trace_obj, []

    @property
    def attempts(self) -> list[AttemptRecord]:
        return [a for r in self.rounds for a in r.attempts]


def _png(width: int, height: int) -> bytes:
    img = Image.new("RGB", (width, height))
    # a gradient, row by row (the order putdata expects)
    img.putdata([(x * 255 // max(1, width - 1), y * 255 // max(1, height - 1), 128)
                 for y in range(height) for x in range(width)])
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _trace(steps: list[dict[str, Any]]) -> SourceTrace:
    return SourceTrace({"image_id": "synthetic", "state": {"all_steps": steps}})


def _attempt(raw: dict[str, Any]) -> AttemptRecord:
    return AttemptRecord.model_validate(raw)


def synthetic_case(run_dir: Path, *, family: str = "qwen3_5", pads: int = 64, seed: int = 7) -> SyntheticCase:
    rng = random.Random(seed)
    S = lambda name: tiny.special_id(name, family)  # noqa: E731 - one-line aliases
    enc = lambda text: tiny.encode(text, family)  # noqa: E731 - one-line aliases
    (run_dir / "media").mkdir(parents=True, exist_ok=True)
    image = _png(64, 32)
    sha = hashlib.sha256(image).hexdigest()
    (run_dir / "media" / f"{sha}.image").write_bytes(image)
    head = (
        [S("<|im_start|>")] + enc("system\nYou verify whether a photo is real.") + [S("<|im_end|>"), S("<|im_start|>")]
        + enc("user\n") + [S("<|vision_start|>")] + [S("<|image_pad|>")] * pads + [S("<|vision_end|>")]
        + enc("Is this photo of the flood real?")
    )
    tail = [S("<|im_end|>"), S("<|im_start|>")] + enc("assistant\n")
    student = head + tail
    teacher = head + enc(HINT_TEXT) + tail
    src_completion = enc("I will check the photo date.") + [S("<|im_end|>")]
    completion = [S("<think>")] + enc("The caption is the evidence.") + [S("</think>")] + enc("I will search the caption.") + [S("<|im_end|>")]

    def capture(prompt: list[int], comp: list[int]) -> dict[str, Any]:
        lps, top = [], []
        for tid in comp:
            p = rng.choice([0.99, 0.8, 0.4, 0.05])
            lps.append(math.log(p))
            alt = 256 + rng.randrange(20)
            top.append([{"token_id": tid, "probability": p}, {"token_id": alt, "probability": round(1 - p, 6)}])
        return {
            "schema_version": "ifv-policy-token-capture-v1", "status": "complete",
            "prompt_token_ids": prompt, "completion_token_ids": comp,
            "completion_logprobs": lps, "completion_topk_by_position": top, "topk": 2, "missing": [],
            "teacher_logprob_semantics": "pre_grammar_unprocessed_v1",
        }

    steps = [
        {"stage": "unified_react", "action_type": "tool_call", "metadata": {}},
        {"stage": "unified_react", "action_type": "tool_call", "metadata": {"policy_token_capture": capture(student, src_completion)}},
    ]
    grid_h = 8
    grid_w = pads * 4 // grid_h  # t*h*w/merge^2 == pads
    attempt = _attempt({
        "schema_version": "ifv-psd-repair-attempt-v1",
        "repair_site": {"source_step_index": 1, "step_index": 1},
        "hint_record": {"text": HINT},
        "student_prompt_ids": student, "teacher_prompt_ids": teacher, "completion_ids": completion,
        "repair_rollout_token_capture": capture(teacher, completion),
        "psd_media": {
            "schema_version": "ifv-psd-media-v3", "processor_id": "/models/Qwen3.5-9B",
            "processor_config": {"patch_size": 16, "merge_size": 2}, "image_sha256": [sha],
            "image_paths": [f"/home/driver/runs/x/media/{sha}.image"], "merge_size": 2,
            "image_grid_thw": [[1, grid_h, grid_w]],
        },
    })
    return SyntheticCase(_trace(steps), [SyntheticRound(0, run_dir, [attempt])], root=run_dir)


def big_ids(n: int, *, family: str = "qwen3_5", pads: int = 1024, seed: int = 1) -> list[int]:
    """``n`` ids: text tokens with an image (vision_start, pads, vision_end) every ~50k ids."""
    rng = random.Random(seed)
    S = lambda name: tiny.special_id(name, family)  # noqa: E731 - one-line aliases
    words = tiny.encode(" the image search result is not a match for the claim because the caption date", family)
    out: list[int] = []
    while len(out) < n:
        if len(out) % 50_000 < 40 and len(out) + pads + 2 < n:
            out += [S("<|vision_start|>")] + [S("<|image_pad|>")] * pads + [S("<|vision_end|>")]
        out.append(words[rng.randrange(len(words))])
    return out[:n]


def big_case(n: int, *, completion: int = 2000, family: str = "qwen3_5", ids: list[int] | None = None) -> SyntheticCase:
    """A case whose ``step:0`` capture holds ``n`` ids (prompt ``n - completion`` + completion):
    :func:`big_ids`, or the first ``n`` of ``ids``."""
    ids = big_ids(n, family=family) if ids is None else ids[:n]
    prompt, comp = ids[: n - completion], ids[n - completion:]
    lps = [-0.05 * (i % 40) for i in range(len(comp))]
    cap = {
        "schema_version": "ifv-policy-token-capture-v1", "status": "complete",
        "prompt_token_ids": prompt, "completion_token_ids": comp, "completion_logprobs": lps,
        "completion_topk_by_position": None, "topk": 0, "missing": [],
    }
    return SyntheticCase(_trace([{"stage": "unified_react", "metadata": {"policy_token_capture": cap}}]))
