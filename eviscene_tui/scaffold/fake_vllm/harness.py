"""Run the fake vLLM server in a background thread on a free loopback port.

    with FakeVLLMServer(personality="nightly", scenario={...}) as srv:
        srv.base_url      # http://127.0.0.1:PORT      (no /v1)
        srv.v1_url        # http://127.0.0.1:PORT/v1   (a profile's base_url)
        srv.recorder      # requests / disconnects / completed seen by the server
        srv.set_scenario(tokens_per_second=5000)

The scenario and profile are live: tests may change them between requests.
"""

from __future__ import annotations

import threading
from typing import Any

from eviscene_tui.scaffold.fake_vllm.server import DEFAULT_PROFILE, DEFAULT_SCENARIO, FakeConfig, FakeRecorder, create_app
from eviscene_tui.scaffold.loopback import ThreadedUvicorn


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
        self._runner: ThreadedUvicorn | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "FakeVLLMServer":
        runner = ThreadedUvicorn(
            create_app(self.config, self.recorder), label="fake vLLM server", thread_name="fake-vllm:{port}",
            host=self.host, port=self._port, log_level=self._log_level, timeout_keep_alive=5,
        )
        self._runner = runner
        runner.start()
        self._port = runner.port
        return self

    def hold(self, after: int = 0) -> None:
        """Keep chat requests numbered ``after`` and later (from 0) unanswered until :meth:`release`."""
        self.config.hold, self.config.hold_from = threading.Event(), after

    def release(self) -> None:
        """Answer the held requests (and every later one)."""
        if self.config.hold is not None:
            self.config.hold.set()

    def stop(self) -> None:
        self.release()  # a held request never keeps the server from stopping
        if self._runner is not None:
            self._runner.stop()
        self._runner = None

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
