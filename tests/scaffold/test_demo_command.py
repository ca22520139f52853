"""`eviscene-tui demo`: starts the fake server, writes an attestable profile copy
into the work dir (never into the evidence root), opens the app, stops the server."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import httpx
import orjson
import pytest

from eviscene_tui.scaffold.commands import demo

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_runs"


def test_demo_wires_profile_and_server(tmp_path, monkeypatch):
    root = tmp_path / "sample_runs"
    root.mkdir()
    if (SAMPLES / "serving-profile.json").is_file():
        shutil.copy(SAMPLES / "serving-profile.json", root / "serving-profile.json")
    seen = {}

    def fake_run_app(path, args):
        prof = orjson.loads(Path(args.policy_profile).read_bytes())
        seen["prof"] = prof
        seen["path"] = Path(path)
        seen["args"] = args
        rows = httpx.get(prof["base_url"] + "/models").json()["data"]
        seen["row"] = rows[0]
        hint_reply = httpx.post(
            args.hint_url + "/chat/completions",
            json={"model": args.hint_model, "messages": [{"role": "user", "content": "propose"}]},
        ).json()
        seen["hints"] = orjson.loads(hint_reply["choices"][0]["message"]["content"])["hints"]
        return 0

    import eviscene_tui.ui.launch as launch

    monkeypatch.setattr(launch, "run_app", fake_run_app)
    monkeypatch.setattr(demo, "terminal_refusal", lambda: None)  # as from a terminal (pytest has none)
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    args = parser.parse_args([str(root)])
    assert demo.run(args) == 0
    prof, row = seen["prof"], seen["row"]
    assert row["id"] == prof["profile_id"] and row["root"] == (prof.get("engine_model_path") or prof["model_path"])
    assert row["max_model_len"] == prof["context_length"]
    assert seen["hints"] and all(isinstance(h, str) and h for h in seen["hints"])  # the demo hint constructor answers
    assert Path(seen["args"].policy_profile).parent == (tmp_path / "sample_runs.eviscene-tui" / "demo").resolve()
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in root.iterdir() if p.name == "serving-profile.json")
    with pytest.raises(httpx.ConnectError):  # the server is stopped when the app exits
        httpx.get(prof["base_url"] + "/models", timeout=2)


def test_demo_missing_path(tmp_path):
    from eviscene_tui.cli import UsageError

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    with pytest.raises(UsageError):
        demo.run(parser.parse_args([str(tmp_path / "nope")]))
