"""Run the fake vLLM server in a background thread on a free loopback port.

    with FakeVLLMServer(personality="nightly", scenario={...}) as srv:
        srv.base_url      # http://127.0.0.1:PORT      (no /v1)
        srv.v1_url        # http://127.0.0.1:PORT/v1   (a profile's base_url)
        srv.recorder      # requests / disconnects / completed seen by the server
        srv.set_scenario(tokens_per_second=5000)

The scenario and profile are live: tests may change them between requests.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from eviscene_tui.fake_vllm.server import DEFAULT_PROFILE, DEFAULT_SCENARIO, FakeConfig, FakeRecorder, create_app


def free_loopback_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class FakeVLLMServer:
    def __init__(
        self,
        *,
        personality: str = "nightly",
        scenario: dict[str, Any] | None = None,
        profile: dict[str, Any] | None = None,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "critical",
        replace_scenario: bool = False,
    ) -> None:
        scen = dict(scenario or {}) if replace_scenario else {**DEFAULT_SCENARIO, **(scenario or {})}
        self.config = FakeConfig(personality=personality, api_key=api_key, profile=dict(profile or DEFAULT_PROFILE), scenario=scen)
        self.recorder = FakeRecorder()
        self.host = host
        self._port = port
        self._log_level = log_level
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "FakeVLLMServer":
        self._sock = free_loopback_socket(self.host, self._port)
        self._port = self._sock.getsockname()[1]
        app = create_app(self.config, self.recorder)
        ucfg = uvicorn.Config(
            app, log_level=self._log_level, access_log=False, lifespan="off",
            timeout_graceful_shutdown=1, timeout_keep_alive=5,
        )
        self._server = uvicorn.Server(ucfg)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, name=f"fake-vllm:{self._port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake vLLM server failed to start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(timeout=5)
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._server = self._thread = self._sock = None

    def __enter__(self) -> "FakeVLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ accessors
    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def v1_url(self) -> str:
        return f"{self.base_url}/v1"

    def set_scenario(self, replace: bool = False, **changes: Any) -> None:
        if replace:
            self.config.scenario.clear()
        self.config.scenario.update(changes)

    def profile_dict(self, **overrides: Any) -> dict[str, Any]:
        """A serving profile for this server (base_url filled in)."""
        prof = {
            "schema_version": "ifv-qwen-serving-profile-v1",
            "deployment_mode": "full_model",
            "engine": "vllm",
            "wire_api": "chat_completions",
            "adapter_path": None,
            "multimodal": True,
            "tool_call_parser": "qwen3_coder",
            "reasoning_parser": "qwen3",
            "thinking_enabled": True,
            "tensor_parallel_size": 1,
            "dtype": "bfloat16",
            "quantization": None,
            "health_probe": {"method": "GET", "path": "/v1/models"},
            "checkpoint_manifest_sha256": None,
            **self.config.profile,
            "base_url": self.v1_url,
        }
        prof.update(overrides)
        return prof
