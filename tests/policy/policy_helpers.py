"""Shared fixtures for the policy tests (imported by test modules; not a conftest)."""

from __future__ import annotations

import dataclasses

import pytest

from eviscene_tui.policy.client import PolicyClient
from eviscene_tui.policy.config import PolicyConfig


@pytest.fixture(autouse=True, params=["direct-body", "httpx-body"])
def body_path(request, monkeypatch):
    """Every test of a module that imports this runs on both ways of reading the stream
    body: straight from the connection (policy/direct_body.py) and through httpx's own
    reader, the latter by the public switch ``PolicyConfig.direct_body = False``."""
    if request.param == "httpx-body":
        real_init = PolicyClient.__init__

        def init(self, target, config=None):
            real_init(self, target, dataclasses.replace(config or PolicyConfig(), direct_body=False))

        monkeypatch.setattr(PolicyClient, "__init__", init)
    return request.param
