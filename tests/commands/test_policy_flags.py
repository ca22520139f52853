"""The policy server's flags are defined once (``cli.add_policy_arguments``) and read by
one rule (``cli.policy_target_from_args``, tested in tests/policy/test_policy_target_rule.py)
for the app, ``stream`` and ``repair``."""

from __future__ import annotations

import argparse

from eviscene_tui import cli
from eviscene_tui.commands import repair, stream

FLAGS = ("--policy-profile", "--policy-url", "--policy-model")


def _policy_actions(parser: argparse.ArgumentParser) -> list[tuple[tuple[str, ...], str | None]]:
    return [(tuple(a.option_strings), a.help) for a in parser._actions if set(a.option_strings) & set(FLAGS)]


def test_the_app_stream_and_repair_offer_the_same_policy_flags() -> None:
    app = argparse.ArgumentParser()
    cli.add_app_arguments(app)
    parsers = {"app": app}
    for name, module in (("stream", stream), ("repair", repair)):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        parsers[name] = parser
    shown = {name: _policy_actions(parser) for name, parser in parsers.items()}
    assert [flags for flags, _help in shown["app"]] == [(f,) for f in FLAGS]
    assert shown["stream"] == shown["app"] and shown["repair"] == shown["app"]
