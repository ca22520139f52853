"""The teacher request asks for logprobs as the failure step's archived generation config did."""

from __future__ import annotations

from eviscene_tui.policy.config import PolicyConfig
from eviscene_tui.policy.request import TeacherRequest, chat_body


def _req(generation: dict) -> TeacherRequest:
    return TeacherRequest(messages=[{"role": "user", "content": "x"}], generation=generation)


def test_archived_logprobs_and_top_logprobs_are_requested():
    body = chat_body(_req({"logprobs": True, "top_logprobs": 3, "max_tokens": 2048, "top_p": 0.95}), PolicyConfig(), model="m")
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    assert body["max_tokens"] == 2048 and body["top_p"] == 0.95


def test_config_wins_and_nothing_is_invented():
    body = chat_body(_req({"logprobs": True, "top_logprobs": 3}), PolicyConfig(top_logprobs=5), model="m")
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    body = chat_body(_req({"max_tokens": 10}), PolicyConfig(), model="m")
    assert "logprobs" not in body and "top_logprobs" not in body
    body = chat_body(_req({"logprobs": "yes", "top_logprobs": True}), PolicyConfig(), model="m")
    assert "logprobs" not in body  # only a real true / a positive int count
    body = chat_body(_req({"logprobs": True}), PolicyConfig(), model="m")
    assert body["logprobs"] is True and "top_logprobs" not in body
