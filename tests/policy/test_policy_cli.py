"""`eviscene-tui stream` end to end in a subprocess against the fake server."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from conftest import sigint_as_in_a_terminal

from eviscene_tui.scaffold.fake_vllm import FakeVLLMServer

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_runs" / "feedback-converged-3-rounds"

pytestmark = pytest.mark.skipif(not SAMPLE.is_dir(), reason="sample_runs not generated")


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def case(tmp_path):
    from eviscene_tui.scaffold.samples import copy_case

    return copy_case(SAMPLE.parent, SAMPLE.name, tmp_path / "runs")


def _run(args, env_extra=None, timeout=60):
    env = {**os.environ, **(env_extra or {})}
    env.pop("EVISCENE_TUI_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "eviscene_tui", "stream", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)


def test_stream_json_end_to_end(tmp_path, case):
    key = "sk-cli-secret-7788"
    before = _tree_hash(case)
    with FakeVLLMServer(api_key=key, scenario={"tokens_per_second": None}) as srv:
        prof = tmp_path / "profile.json"
        prof.write_bytes(orjson.dumps(srv.profile_dict()))
        wd = tmp_path / "wd"
        res = _run([str(case), "--policy-profile", str(prof), "--workdir", str(wd), "--json", "--hint", "Compare dates first."],
                   env_extra={"EVISCENE_POLICY_API_KEY": key})
        body = srv.recorder.last_body()
    assert res.returncode == 0, res.stderr
    lines = [orjson.loads(line) for line in res.stdout.splitlines()]
    types = [line["type"] for line in lines]
    assert types[0] == "request" and types[1] == "attestation" and types[-1] == "record"
    assert {"delta", "usage", "finish", "prompt_tokens", "tool_call"} <= set(types)
    assert lines[1]["status"] == "attested"
    assert any(line["type"] == "delta" and line["token_ids"] for line in lines)
    rec_line = lines[-1]
    assert rec_line["status"] == "complete" and rec_line["accounting"]["match"] is True
    assert rec_line["served_model"]["match"] is True and rec_line["non_integer_token_ids"]["count"] == 0
    rec = orjson.loads(Path(rec_line["path"]).read_bytes())
    assert rec["status"] == "complete" and rec["request"]["hint"] == "Compare dates first."
    assert rec["request"]["origin"]["source"] == "archive"
    # the hint went where this run's driver put its hints (learned from the run's own hinted
    # request: a new user message "Hint: ..."); the image was sent as a data URL
    assert body["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "Hint: Compare dates first."}]}
    assert rec["request"]["hint_placement"] == "as_run" and rec["request"]["hint_rule"].startswith("as in this run (round ")
    assert rec["request"]["hint_template"]["mode"] == "new_message"
    user = [m for m in body["messages"] if m["role"] == "user"][0]["content"]
    assert any(p.get("type") == "image_url" and p["image_url"]["url"].startswith("data:image/") for p in user)
    assert key not in res.stdout and key not in res.stderr
    assert all(key.encode() not in p.read_bytes() for p in wd.rglob("*") if p.is_file())
    assert _tree_hash(case) == before  # evidence untouched


def test_stream_json_escapes_what_a_terminal_would_act_on(tmp_path, case):
    """The server's text (C1 controls, line separators, bidi overrides) reaches stdout
    as ``\\u`` escapes inside valid JSON lines that parse to the exact text."""
    hostile = "ok \x9b[2J \x85 \u2028 \u202eevil\u202c 漢字"
    with FakeVLLMServer(scenario={"tokens_per_second": None, "content": hostile, "reasoning": "", "tool_calls": []}) as srv:
        prof = tmp_path / "profile.json"
        prof.write_bytes(orjson.dumps(srv.profile_dict()))
        res = _run([str(case), "--policy-profile", str(prof), "--workdir", str(tmp_path / "wd"), "--json", "--hint", "h\u202e"])
    assert res.returncode == 0, res.stderr
    for ch in ("\x9b", "\x85", "\u2028", "\u202e", "\u202c"):
        assert ch not in res.stdout, repr(ch)
    lines = [orjson.loads(line) for line in res.stdout.splitlines()]
    assert "".join(line.get("text") or "" for line in lines if line["type"] == "delta" and line.get("kind") == "content") == hostile
    assert lines[0]["hint"] == "h\u202e"


def test_stream_plain_and_exit_codes(tmp_path, case):
    with FakeVLLMServer(scenario={"tokens_per_second": None, "wrong_root": "/elsewhere"}) as srv:
        prof = tmp_path / "profile.json"
        prof.write_bytes(orjson.dumps(srv.profile_dict()))
        res = _run([str(case), "--policy-profile", str(prof), "--workdir", str(tmp_path / "wd")])
        assert res.returncode == 1 and "root differs" in res.stderr
        srv.set_scenario(wrong_root=None)
        res = _run([str(case), "--policy-url", srv.v1_url, "--policy-model", srv.config.alias, "--workdir", str(tmp_path / "wd")])
        assert res.returncode == 0, res.stderr
        assert "[reasoning]" in res.stdout and "unattested" in res.stderr and "status: complete" in res.stderr
    from eviscene_tui.cli import main

    assert main(["stream", str(case)]) == 2
    assert main(["stream", str(tmp_path / "nope"), "--policy-url", "http://x", "--policy-model", "m"]) == 2
    assert main(["stream", str(case), "--policy-url", "http://x"]) == 2
    assert main(["stream", str(case), "--policy-profile", str(tmp_path / "missing.json")]) == 2


def test_ctrl_c_cancels_and_records(tmp_path, case):
    # the case asks for 2,048 tokens (its generation config): at 20 a second the stream needs
    # ~100 s, longer than the client is given to exit after the interrupt, even when a starved
    # server catches up on its pacing in a burst (at 200 a second a loaded machine let it finish)
    with FakeVLLMServer(scenario={"tokens_per_second": 20, "content_tokens": 200_000, "reasoning": "", "tool_calls": []}) as srv:
        wd = tmp_path / "wd"
        with sigint_as_in_a_terminal():  # the operator's Ctrl-C reaches it even when the suite runs in the background
            proc = subprocess.Popen([sys.executable, "-m", "eviscene_tui", "stream", str(case), "--policy-url", srv.v1_url,
                                     "--policy-model", srv.config.alias, "--workdir", str(wd), "--json"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        # readiness: the first streamed delta on stdout (then the stream is surely running)
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if orjson.loads(line).get("type") == "delta":
                break
        else:
            raise AssertionError(f"the stream ended before a delta: {seen[-3:]!r}")
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
        out = "".join(seen) + rest
        # the client is gone (its process exited, so its connection is closed) and the
        # stream was cut before its end; when the fake server's own loop notices the
        # closed connection is the server's business, not the client's
        assert not srv.recorder.completed
    assert proc.returncode == 130, err
    last = orjson.loads(out.splitlines()[-1])
    assert last["type"] == "record" and last["status"] == "cancelled"
    rec = orjson.loads(Path(last["path"]).read_bytes())
    assert rec["status"] == "cancelled" and 0 < len(rec["completion_token_ids"]) < 200_000


def test_missing_archived_image_is_a_recorded_failure(tmp_path, case, capsys):
    from eviscene_tui.cli import main

    # the failure step's request lives in the source rollout's archive, beside its trace
    archives = (case, case.parent / "inputs" / case.name)
    removed = [p for a in archives for p in a.rglob("artifacts/sha256/*/*") if p.suffix in (".png", ".jpg", ".jpeg", ".webp")]
    assert removed
    for p in removed:
        p.unlink()
    wd = tmp_path / "wd"
    code = main(["stream", str(case), "--policy-url", "http://127.0.0.1:9/v1", "--policy-model", "m", "--workdir", str(wd), "--json"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    err, last = orjson.loads(out[0]), orjson.loads(out[-1])
    assert err["type"] == "error" and err["kind"] == "request" and "image" in err["message"]
    assert last["type"] == "record" and last["status"] == "failed"
    assert orjson.loads(Path(last["path"]).read_bytes())["error"]["kind"] == "request"


def test_stream_on_a_tree_written_elsewhere_and_moved(tmp_path):
    """The failure step's request comes from the source rollout's archive beside the moved
    trace (the original location is gone), and the --path-map flag is accepted."""
    import shutil as _shutil

    from conftest import generate_samples

    written = tmp_path / "cluster" / "sample_runs"
    generate_samples(written, base=str(written), cases=["feedback-converged-3-rounds"])
    moved = tmp_path / "copy" / "runs"
    moved.parent.mkdir()
    _shutil.move(str(written), str(moved))
    _shutil.rmtree(tmp_path / "cluster")
    case = moved / "feedback-converged-3-rounds"
    before = _tree_hash(moved)
    with FakeVLLMServer(scenario={"tokens_per_second": None}) as srv:
        prof = tmp_path / "profile.json"
        prof.write_bytes(orjson.dumps(srv.profile_dict()))
        res = _run([str(case), "--policy-profile", str(prof), "--workdir", str(tmp_path / "wd"), "--json", "--hint", "Compare dates first.",
                    "--path-map", "/nowhere=/also-nowhere"])
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    lines = [orjson.loads(line) for line in res.stdout.splitlines()]
    rec = orjson.loads(Path(lines[-1]["path"]).read_bytes())
    assert rec["status"] == "complete" and rec["request"]["origin"]["source"] == "archive"
    assert not any("no runtime store found" in str(line) for line in lines)
    assert _tree_hash(moved) == before  # nothing written into the tree or its inputs
    bad = _run([str(case), "--policy-url", "http://127.0.0.1:9/v1", "--policy-model", "m", "--path-map", "no-equals-sign"])
    assert bad.returncode == 2 and "OLD=NEW" in bad.stderr


def test_case_without_a_failure_site_is_refused_before_writing(tmp_path, capsys):
    """A search that found no recoverable site has no failure step to continue: `stream`
    says so and exits 2 (bad usage) without writing a record to the work directory."""
    from eviscene_tui.cli import main
    from eviscene_tui.scaffold.samples import copy_case

    case = copy_case(SAMPLE.parent, "search-no-recoverable-site", tmp_path / "runs")
    wd = tmp_path / "wd"
    code = main(["stream", str(case), "--policy-url", "http://127.0.0.1:9/v1", "--policy-model", "m", "--workdir", str(wd)])
    captured = capsys.readouterr()
    assert code == 2
    assert "no localized failure site" in captured.err and "nothing was written" in captured.err
    assert "None" not in captured.err and captured.out == ""
    assert not [p for p in wd.rglob("*") if p.is_file()]  # no failed record
