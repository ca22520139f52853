"""Small helpers shared by the policy/fake-server tests and the benchmark."""

from __future__ import annotations

import asyncio
import base64
from contextlib import aclosing
import io
from typing import Any

from PIL import Image

from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.policy.accumulate import StreamAccumulator
from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.profile import PolicyTarget, target_from_profile_dict, unattested_target
from eviscene_tui.policy.request import TeacherRequest, apply_hint, chat_body

TOOLS = [{
    "type": "function",
    "function": {"name": "reverse_image_search", "description": "search the web for an image",
                 "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}},
}]


def png_data_url(width: int = 64, height: int = 48, color: tuple[int, int, int] = (200, 30, 30)) -> tuple[str, bytes]:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, format="PNG")
    raw = buf.getvalue()
    return "data:image/png;base64," + base64.b64encode(raw).decode(), raw


def simple_request(hint: str | None = "Check the photo's date first.", *, tools: bool = True, image: bool = False) -> TeacherRequest:
    user: list[dict[str, Any]] = [{"type": "text", "text": "Is this claim about the photo real or fake?"}]
    if image:
        url, _ = png_data_url()
        user.append({"type": "image_url", "image_url": {"url": url}})
    msgs, loc = apply_hint([{"role": "system", "content": "You verify image claims."}, {"role": "user", "content": user}], hint)
    return TeacherRequest(messages=msgs, tools=list(TOOLS) if tools else None, hint=hint, hint_location=loc)


def target_for(server: FakeVLLMServer, **profile_overrides: Any) -> PolicyTarget:
    return target_from_profile_dict(server.profile_dict(**profile_overrides))


def unattested_for(server: FakeVLLMServer, model: str | None = None) -> PolicyTarget:
    return unattested_target(server.v1_url, model or server.config.alias)


async def collect(target: PolicyTarget, request: TeacherRequest | None = None, config: PolicyConfig | None = None) -> StreamAccumulator:
    """Stream one continuation and fold it (no recording)."""
    cfg = config or PolicyConfig()
    acc = StreamAccumulator()
    async with PolicyClient(target, cfg) as client:
        async with aclosing(client.continuation(chat_body(request or simple_request(), cfg, model=target.model))) as events:
            async for ev in events:
                acc.add(ev)
    return acc


def run(coro: Any) -> Any:
    return asyncio.run(coro)
