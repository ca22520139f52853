"""A small driver-written case (multi-case wrapper layout) for the bundled driver's tests.

``<out>/case-inputs/<key>/{trace,candidate,public,private}.json`` and the search
root ``<out>/repairs/<key>/`` with one round whose candidate localizes step 3.
Steps 1, 3 and 5 are policy steps with complete token captures; 5 is the judgment.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from conftest import wait_until_sync
from gate_fixtures import CLI, ENV, wait_until
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from eviscene_tui.artifacts.jsonio import canonical_sha256, encode_bound, pretty_json_bytes, sha256_file
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.scaffold.tiny import encode

KEY = "0123456789abcdef"
SYSTEM = "You are a fact-checking agent. Use tools, then give a verdict."
PRIVATE_TITLE = "Flooded Metro Station Lyon 2021"


def _capture(prompt: str, completion: str) -> dict:
    p, c = encode(prompt), encode(completion)
    return {
        "schema_version": "ifv-policy-token-capture-v1",
        "status": "complete",
        "prompt_token_ids": p,
        "completion_token_ids": c,
        "completion_logprobs": [-0.1] * len(c),
        "completion_topk_by_position": [],
        "topk": 0,
        "missing": [],
    }


def _policy_step(i: int, stage: str, user: str, *, tool: str | None, thought: str, output: str | None) -> dict:
    policy_input = {
        "system_instruction": SYSTEM,
        "input_payload": {"messages": [{"role": "user", "content": user}]},
        "tools": [{"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}],
        "response_format": None,
    }
    action = {"content": output, "tool_calls": [{"name": tool, "arguments": "{}"}] if tool else None}
    return {
        "round": i,
        "stage": stage,
        "action_type": "tool_call" if tool else "output",
        "tool_name": tool,
        "tool_args": {"q": f"query {i}"} if tool else None,
        "tool_result": json.dumps({"hits": i}) if tool else None,
        "thought": thought,
        "output": output,
        "tokens": {"prompt": 10, "completion": 5, "thought": 0},
        "metadata": {
            "policy_input": policy_input,
            "policy_action": action,
            "policy_token_capture": _capture(SYSTEM + user, thought + (output or "")),
            "interaction_id": f"iid-{i}",
            "context_request_id": f"req-{i:06d}",
        },
    }


def make_trace() -> dict:
    steps = [
        {"round": 0, "stage": "perception", "action_type": "output", "tool_name": None, "output": "a street", "tokens": {}},
        _policy_step(1, "unified_react", "Check the photo of the flood.", tool="web_search", thought="search news", output=None),
        {"round": 2, "stage": "tool", "action_type": "tool_call", "tool_name": "fetch", "tool_result": "page", "tokens": {}},
        _policy_step(3, "unified_react", "Results: nothing found.", tool="web_search", thought="search again same", output=None),
        {"round": 4, "stage": "tool", "action_type": "tool_call", "tool_name": "fetch", "tool_result": "page2", "tokens": {}},
        _policy_step(5, "unified_judgment", "Decide.", tool=None, thought="decide now", output='{"verdict": "real"}'),
    ]
    return {
        "image_id": "img-42",
        "case_id": "case-42",
        "verdict": "real",
        "state": {"image_id": "img-42", "runtime_case": {"case_id": "case-42"}, "all_steps": steps},
    }


def write_driver_case(out: Path, *, with_site: bool = True) -> Path:
    """Write the wrapper; return the search root ``<out>/repairs/<key>``."""
    inputs = out / "case-inputs" / KEY
    inputs.mkdir(parents=True)
    trace = make_trace()
    (inputs / "trace.json").write_bytes(pretty_json_bytes(trace))
    trace_sha = sha256_file(inputs / "trace.json")
    seed = {
        "schema_version": "ifv-psd-candidate-v1",
        "candidate_id": "psd-candidate:seed",
        "class": "repair_seed",
        "case_id": "case-42",
        "episode_id": "img-42",
        "repair_signal": "terminal_outcome_mismatch",
        "source": {"source_trace_sha256": trace_sha},
    }
    (inputs / "candidate.json").write_bytes(pretty_json_bytes(seed))
    (inputs / "public.json").write_bytes(pretty_json_bytes({"claim": "The photo shows a flood in Lyon."}))
    (inputs / "private.json").write_bytes(pretty_json_bytes({"gold": {"expected_verdict": "fake", "source_title": PRIVATE_TITLE}}))
    root = out / "repairs" / KEY
    rdir = root / "rounds" / "round-00"
    rdir.mkdir(parents=True)
    binding = lambda p: {"path": str(p.resolve()), "sha256": sha256_file(p)}  # noqa: E731 - a one-line helper
    identity = {
        "version": "ifv-psd-feedback-search-v1",
        "inputs": {
            "trace": binding(inputs / "trace.json"),
            "candidate": binding(inputs / "candidate.json"),
            "public_context": binding(inputs / "public.json"),
            "private_context": binding(inputs / "private.json"),
            "output_dir": str(root.resolve()),
        },
        "max_attempts": 6,
        "max_proposals": 12,
        "max_seconds": 1800,
    }
    cand = dict(seed)
    cand["candidate_status"] = "localized"
    cand["repair_site"] = {
        "step_id": "img-42:react:iid-3",
        "source_step_index": 3,
        "stage": "unified_react",
        "example_type": "react",
        "localization_kind": "semantic_task_verifier",
        "semantic_category": "ignored_repeated_no_match",
        "rollout_token_capture": trace["state"]["all_steps"][3]["metadata"]["policy_token_capture"],
    }
    if not with_site:  # a no_recoverable_site round: no candidate row
        cand = None
    (rdir / "repair_candidates.jsonl").write_bytes((json.dumps(cand, sort_keys=True, separators=(",", ":")) + "\n").encode() if cand else b"")
    (rdir / "repair_attempts.jsonl").write_bytes(b"")
    for name, data in encode_bound(rdir / "run-inputs.json", {"output_dir": str(rdir.resolve()), "trace": binding(inputs / "trace.json")}, {"status": "initialized"}).items():
        (rdir / name).write_bytes(data)
    (rdir / "manifest.json").write_bytes(pretty_json_bytes({"schema_version": "ifv-psd-repair-driver-result-v1", "status": "generating", "candidate_count": 0, "accepted_count": 0}))
    for name, data in encode_bound(root / "search-state.json", identity, {"status": "paused_pending_verifier", "elapsed_seconds": 1.0, "rounds": []}).items():
        (root / name).write_bytes(data)
    (root / "manifest.json").write_bytes(pretty_json_bytes({"schema_version": "ifv-psd-feedback-search-v1", "status": "paused_pending_verifier", "rounds": []}))
    (root / "search.lock").write_bytes(b"")
    return root


def tree_hash(root: Path) -> str:
    """Names, kinds, modes and bytes of every entry under root."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            p = Path(dirpath) / name
            st = os.lstat(p)
            h.update(f"{p.relative_to(root)}\0{stat.S_IFMT(st.st_mode)}\0{stat.S_IMODE(st.st_mode)}\0{st.st_mtime_ns}\0".encode())
            if stat.S_ISREG(st.st_mode):
                h.update(p.read_bytes())
    return h.hexdigest()


class ScriptedHintServer:
    """A tiny OpenAI-compatible chat endpoint answering scripted ``{"hints": [...]}`` replies."""

    def __init__(self, replies: list[list[str] | str]) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        self.sock = sock
        self.port = sock.getsockname()[1]

        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            reply = self.replies.pop(0) if self.replies else []
            text = reply if isinstance(reply, str) else json.dumps({"hints": reply})
            return JSONResponse(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                }
            )

        app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "ScriptedHintServer":
        self.thread.start()
        wait_until_sync(lambda: self.server.started, what="the scripted hint server")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
        self.sock.close()


def canonical(x) -> str:
    return canonical_sha256(x)


# ---------------------------------------------------------------------- the bundled driver as a real subprocess
@dataclass
class Repair:
    """A case for ``eviscene-tui repair`` and where its search goes (the root it prints)."""

    case: Path
    workdir: Path
    policy_url: str
    policy_model: str
    hint_url: str | None = None
    root: Path | None = None

    @property
    def gate_dir(self) -> Path:
        assert self.root is not None
        return self.root.parent / (self.root.name + ".eviscene-gate")

    def argv(self, *, resume: bool = False) -> list[str]:
        argv = [*CLI, "repair", str(self.case), "--workdir", str(self.workdir), "--policy-url", self.policy_url,
                "--policy-model", self.policy_model, "--operator", "alice"]
        if self.hint_url:
            argv += ["--hint-url", self.hint_url, "--hint-model", "demo-hint-constructor"]
        if self.root is not None:
            argv += ["--output-dir", str(self.root)]
        return argv + (["--resume"] if resume else [])


def start_repair(repair: Repair, *, resume: bool = False) -> subprocess.Popen:
    """``eviscene-tui repair`` as a real subprocess; its first line names the search root."""
    log = repair.workdir.parent / f"repair-{time.monotonic_ns()}"
    repair.workdir.mkdir(parents=True, exist_ok=True)
    with open(f"{log}.out", "wb") as out, open(f"{log}.err", "wb") as err:
        proc = subprocess.Popen(repair.argv(resume=resume), stdout=out, stderr=err, env=ENV)
    proc.log = log  # type: ignore[attr-defined]  # the log file rides on the process object

    def first_line() -> str | None:
        text = Path(f"{log}.out").read_text(encoding="utf-8", errors="replace")
        return text.split("\n", 1)[0] if "\n" in text else None

    line = wait_until(lambda: first_line() or proc.poll() is not None, "the search root line")
    assert isinstance(line, str) and line.startswith("search root: "), (line, Path(f"{log}.err").read_text())
    root = Path(line.removeprefix("search root: "))
    assert repair.root in (None, root)
    repair.root = root
    return proc


def live_records(repair: Repair) -> list[dict]:
    path = repair.gate_dir / "live.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]


def waiting(root: Path, kind: str, round_index: int, *, phase: str | None = None):
    """A condition: the pending gate of that kind and round, published and waited on by the driver."""

    def check() -> dict | None:
        st = read_status(root)
        for p in st.pending:
            if p.kind == kind and p.round == round_index and st.driver.waiting == p.name and (phase is None or p.doc.get("phase") == phase):
                return p.as_pending()
        return None

    return check
