"""The scripted prompt side: image pads per image, and a fixed small count for an image
the server cannot decode (a bad data URL must not fail the request)."""

from __future__ import annotations

import pytest

from eviscene_tui.scaffold.fake_vllm.script import image_pad_count, template_prompt_ids
from eviscene_tui.scaffold.fake_vllm.testing import png_data_url
from eviscene_tui.scaffold.tiny import special_id


@pytest.mark.parametrize("family, side", [("qwen3_5", 32), ("qwen2_5_vl", 28)])
def test_one_pad_per_merged_patch(family: str, side: int) -> None:
    url, _ = png_data_url(width=3 * side, height=side + 1)
    assert image_pad_count(url, family) == 3 * 2


@pytest.mark.parametrize("url", ["data:image/png;base64,not-base64!", "data:image/png;base64,aGVsbG8=", "no comma"])
def test_undecodable_image_gets_the_fixed_pad_count(url: str) -> None:
    assert image_pad_count(url, "qwen3_5") == 4
    msgs = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]
    ids = template_prompt_ids(msgs, "qwen3_5")
    assert ids.count(special_id("<|image_pad|>", "qwen3_5")) == 4
