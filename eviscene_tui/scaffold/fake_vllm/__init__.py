"""A vLLM-compatible fake server for demos and tests (see server.py for the scenario keys)."""

from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer
from eviscene_tui.scaffold.fake_vllm.server import DEFAULT_PROFILE, DEFAULT_SCENARIO, FakeConfig, FakeRecorder, create_app, load_scenario

__all__ = ["FakeVLLMServer", "FakeConfig", "FakeRecorder", "create_app", "load_scenario", "DEFAULT_PROFILE", "DEFAULT_SCENARIO"]
