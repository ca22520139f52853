"""A scripted hint constructor for demos: an OpenAI-compatible ``/v1/chat/completions``
endpoint that answers ``{"hints": [...]}`` without any model.

It reads the ``repair_search`` feedback from the prompt it receives and follows
the driver's rules: it never repeats an excluded hint and keeps a locked hint
verbatim followed by a newline. One of its proposals deliberately states a
verdict, so the demo shows an audit failure (``binary_verdict_leak``).

    with DemoHintServer() as srv:      # free loopback port
        srv.v1_url                     # pass as --hint-url, any --hint-model
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from eviscene_tui.scaffold.loopback import ThreadedUvicorn

POOL = (
    "Before searching again, reread the previous tool results and name what they already rule out.",
    "Search for the exact caption text in quotes, then compare the earliest publication date with the claimed date.",
    "Check whether the landmarks visible in the image match the place named in the claim, using a map or street-level imagery.",
    "Look for the original uploader of the image and the context of the first post before judging the claim.",
    "Compare the weather and season visible in the image with records for the claimed date and place.",
)
LEAKY = "The photo is fake; answer fake."


def _feedback_from(body: dict[str, Any]) -> dict[str, Any]:
    for msg in body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, str) or "repair_search" not in content:
            continue
        start = content.find("\n\n{")
        if start < 0:
            continue
        try:
            packet = json.loads(content[start:])
        except ValueError:
            continue
        fb = (packet.get("trace_context") or {}).get("repair_search")
        if isinstance(fb, dict):
            return fb
    return {}


def propose(body: dict[str, Any]) -> list[str]:
    fb = _feedback_from(body)
    excluded = {h.strip() for h in fb.get("excluded_hints") or [] if isinstance(h, str)}
    lock = fb.get("locked_hint") or ""
    count = 3
    for msg in body.get("messages") or []:
        m = re.search(r"up to (\d+) hint", str(msg.get("content") if isinstance(msg, dict) else ""))
        if m:
            count = max(1, int(m.group(1)))
    fresh = [h for h in POOL if h.strip() not in excluded and h != lock]
    hints = [f"{lock}\n{h}" if lock else h for h in fresh]
    hints = [h for h in hints if h.strip() not in excluded]
    if not lock and count > 1:
        hints = [LEAKY] + hints
    return hints[:count]


def create_app() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": {"message": "invalid JSON body", "type": "BadRequestError"}}, status_code=400)
        text = json.dumps({"hints": propose(body if isinstance(body, dict) else {})})
        return JSONResponse(
            {
                "id": "demo-hints",
                "object": "chat.completion",
                "model": body.get("model") if isinstance(body, dict) else None,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": len(text) // 4, "total_tokens": 0},
            }
        )

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "demo-hint-constructor", "object": "model"}]})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)])


class DemoHintServer:
    """Runs :func:`create_app` with uvicorn in a daemon thread on a free loopback port."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._port = port
        self._runner: ThreadedUvicorn | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def v1_url(self) -> str:
        return f"http://{self.host}:{self._port}/v1"

    def start(self) -> "DemoHintServer":
        runner = ThreadedUvicorn(create_app(), label="demo hint server", thread_name="demo-hints", host=self.host, port=self._port)
        self._runner = runner
        runner.start()
        self._port = runner.port
        return self

    def stop(self) -> None:
        if self._runner is not None:
            self._runner.stop()
        self._runner = None

    def __enter__(self) -> "DemoHintServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
