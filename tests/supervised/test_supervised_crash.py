"""Crash safety of the whole supervised service: SIGKILL a process at random points
while it starts rounds, accepts sites, approves hints, records continuations and
gives verdicts; the next process reopens (resumes) the same root and goes on.

Afterwards: the journal parses and its chain verifies, every decision the process
had acknowledged ("ack <id>" printed after the journaled call returned) is
present, the search reopens, finishing the open round works, and `check` reports
no problem on the supervised root.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from eviscene_tui.policy.events import TokenLogprob
from eviscene_tui.artifacts.case import load_case
from eviscene_tui.journal import Journal, supervised_journal_for_root, verify_chain
from eviscene_tui.supervised import Budgets, SearchSettings, SupervisedSearch, inputs_from_case

from supervised_fixtures import write_driver_case

HERE = Path(__file__).resolve().parent

ZYGOTE = r"""
import asyncio, os, sys
sys.path.insert(0, sys.argv[3])
from eviscene_tui.artifacts.case import load_case
from eviscene_tui.policy.events import TokenLogprob
from eviscene_tui.supervised import Budgets, ContinuationOutcome, SearchSettings, SupervisedSearch, inputs_from_case
from eviscene_tui.tokens.tiny import encode

droot, work = sys.argv[1], sys.argv[2]

async def runner(job):
    ids = encode("call " + job.hint)
    return ContinuationOutcome(status="complete", reasoning="r", tool_calls=[{"id": "1", "name": "web_search", "arguments": "{}"}],
        prompt_token_ids=encode("p " + job.hint), completion_token_ids=ids,
        logprobs=[TokenLogprob(token="", logprob=-0.1) for _ in ids], finish_reason="tool_calls",
        usage={"prompt_tokens": 1, "completion_tokens": len(ids)}, policy_model="m")

def ack(ev):
    os.write(1, ("ack " + ev["id"] + "\n").encode())

def child():
    s = SupervisedSearch.start(inputs_from_case(load_case(droot), label="c"), work,
                               settings=SearchSettings(operator="crash"), budgets=Budgets(max_attempts=32, max_proposals=64))
    if s.read_only:
        os.write(1, b"readonly\n"); os._exit(3)
    if s.torn_tail_warning:
        ack(s.acknowledge_torn_tail("recovered"))
    n = 0
    while True:
        d = s.draft
        if s.stopped:
            os.write(1, b"done\n"); os._exit(0)
        if d is None or d.stage == "closed":
            s.begin_round(); ack(s.journal.events[-1])
        elif d.stage == "site":
            ack(s.accept_site())
        elif d.stage == "hints":
            n += 1
            p = s.add_operator_hint(f"Hint {os.getpid()} {n}: search the caption.")
            ack(s.approve_hint(p.index))
        elif d.stage == "continuation":
            asyncio.run(s.run_continuation(runner))
        elif d.stage == "verdict":
            ack(s.reject_attempt("no", checker={"anchor_matches": True}))

for line in sys.stdin:
    if line.strip() != "fork":
        break
    pid = os.fork()
    if pid == 0:
        try:
            child()
        except BaseException as exc:
            os.write(1, ("error " + type(exc).__name__ + ": " + str(exc).replace("\n", " ") + "\n").encode())
            os._exit(4)
    os.write(1, ("pid %d\n" % pid).encode())
    _, status = os.waitpid(pid, 0)
    os.write(1, ("dead %d %d\n" % (pid, status)).encode())
"""

TRIALS = 16


def test_sigkill_during_supervised_rounds(tmp_path):
    droot = write_driver_case(tmp_path / "out")
    work = tmp_path / "w"
    rng = random.Random(int(os.environ.get("EVISCENE_CRASH_SEED", "7")))
    acked: list[str] = []
    zygote = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE, str(droot), str(work), str(HERE)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        for _ in range(TRIALS):
            zygote.stdin.write("fork\n")
            zygote.stdin.flush()
            pid = None
            got_ack = False
            while pid is None or not got_ack:
                line = zygote.stdout.readline()
                assert line, zygote.stderr.read()
                assert not line.startswith(("error", "readonly")), line
                if line.startswith("pid "):
                    pid = int(line.split()[1])
                elif line.startswith("ack "):
                    acked.append(line.split()[1])
                    got_ack = True
            time.sleep(rng.uniform(0, 0.08))
            os.kill(pid, signal.SIGKILL)
            while True:
                line = zygote.stdout.readline()
                assert line, zygote.stderr.read()
                assert not line.startswith("error"), line
                if line.startswith("dead "):
                    break
                if line.startswith("ack ") and len(line.split()) == 2:
                    acked.append(line.split()[1])
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30)

    inputs = inputs_from_case(load_case(droot), label="c")
    s = SupervisedSearch.start(inputs, work, settings=SearchSettings(operator="crash"), budgets=Budgets(max_attempts=32, max_proposals=64))
    jpath = supervised_journal_for_root(s.root)
    rep = verify_chain(jpath)
    assert rep.ok, rep.problems
    ids = {e["id"] for e in Journal(jpath, read_only=True).events}
    assert set(acked) <= ids and len(acked) >= TRIALS
    # finish the open round (resume from whatever gate the last kill left)
    from eviscene_tui.supervised import ContinuationOutcome
    from eviscene_tui.tokens.tiny import encode
    import asyncio

    async def runner(job):
        ids_ = encode("x")
        return ContinuationOutcome(status="complete", tool_calls=[{"id": "1", "name": "web_search", "arguments": "{}"}],
                                   prompt_token_ids=encode("p"), completion_token_ids=ids_,
                                   logprobs=[TokenLogprob(token="", logprob=-0.1) for _ in ids_])

    if s.torn_tail_warning:
        s.acknowledge_torn_tail()
    for _ in range(6):
        d = s.draft
        if d is None or d.stage == "closed":
            break
        if d.stage == "site":
            s.accept_site()
        elif d.stage == "hints":
            s.approve_hint(s.add_operator_hint("Final hint: check the date.").index)
        elif d.stage == "continuation":
            asyncio.run(s.run_continuation(runner))
        elif d.stage == "verdict":
            s.approve_attempt()
    assert s.draft is None or s.draft.stage == "closed"
    assert len(s.history) >= 2
    s.close()
    proc = subprocess.run([sys.executable, "-m", "eviscene_tui", "check", str(s.root), "--json"], capture_output=True, timeout=120)
    report = json.loads(proc.stdout)
    assert [p for c in report["cases"] for p in c["problems"]] == []
