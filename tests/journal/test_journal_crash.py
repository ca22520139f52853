"""Crash safety: SIGKILL a writer at random points while it appends decisions.

Each trial starts a writer process (forked from a per-lane zygote) on a journal
that earlier (killed) writers left behind, waits for its first acknowledged decision, sleeps a random
few milliseconds and SIGKILLs it. Afterwards the journal parses, its chain
verifies and every decision the writer had acknowledged ("ack <id>" printed only
after append() returned, i.e. after write + fsync) is present; a line torn by the kill
(only the last, unacknowledged one) is found at the end and recovered by the next
writer. Several journals run in parallel lanes to keep the test fast.
"""

import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from eviscene_tui.journal import Journal, fold, verify_chain

# A "zygote" per lane imports the journal once, then forks one writer per trial,
# so the 50+ trials cost a fork each instead of a Python start-up each. The
# writer is a separate process that the test SIGKILLs; it writes "ack <id>" with
# one os.write (atomic on a pipe) only after Journal.append returned.
ZYGOTE = r"""
import os, sys
from eviscene_tui.journal import Journal
path = sys.argv[1]
for line in sys.stdin:
    if line.strip() != "fork":
        break
    pid = os.fork()
    if pid == 0:
        j = Journal(path, operator="crash-test")
        if j.read_only:
            os.write(1, b"readonly\n"); os._exit(3)
        if j.torn_tail is not None:
            os.write(1, b"torn\n")
            j.acknowledge_torn_tail(note="recovered after crash")
        i = 0
        actions = ["approve_hint", "reject_hint", "comment", "reject_attempt", "triage_label"]
        while True:
            a = actions[i % len(actions)]
            kw = {"reason": "r%d" % i, "target": {"case": "c", "round": i % 3, "hint_sha256": "h%d" % (i % 7), "attempt_id": "a%d" % i}}
            if a == "triage_label":
                kw["data"] = {"label": "note"}
            ev = j.append(a, evidence={"x.json": "0" * 64}, **kw)
            os.write(1, ("ack " + ev["id"] + "\n").encode())
            i += 1
    os.write(1, ("pid %d\n" % pid).encode())
    _, status = os.waitpid(pid, 0)
    os.write(1, ("dead %d %d\n" % (pid, status)).encode())
"""

TRIALS_PER_LANE = 13
LANES = 4


def _lane(path, seed):
    rng = random.Random(seed)
    acked = []
    torn_seen = 0
    zygote = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(TRIALS_PER_LANE):
            zygote.stdin.write("fork\n")
            zygote.stdin.flush()
            pid = None
            first_ack = False
            while not first_ack:
                line = zygote.stdout.readline()
                assert line, zygote.stderr.read()
                if line.startswith("pid "):
                    pid = int(line.split()[1])
                elif line.startswith("torn"):
                    torn_seen += 1
                elif line.startswith("ack "):
                    acked.append(line.split()[1])
                    first_ack = True
                else:
                    raise AssertionError(line)
            if pid is None:  # the parent's "pid" line may come after the child's first ack
                line = zygote.stdout.readline()
                while not line.startswith("pid "):
                    if line.startswith("ack "):
                        acked.append(line.split()[1])
                    line = zygote.stdout.readline()
                pid = int(line.split()[1])
            time.sleep(rng.uniform(0, 0.02))
            os.kill(pid, signal.SIGKILL)
            while True:
                line = zygote.stdout.readline()
                assert line, zygote.stderr.read()
                if line.startswith("dead "):
                    _, dead_pid, status = line.split()
                    assert int(dead_pid) == pid and os.WIFSIGNALED(int(status)) and os.WTERMSIG(int(status)) == signal.SIGKILL
                    break
                if line.startswith("ack ") and len(line.split()) == 2:
                    acked.append(line.split()[1])
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30)
    return acked, torn_seen


def test_sigkill_at_random_points_keeps_every_acknowledged_decision(tmp_path):
    paths = [tmp_path / f"lane{i}" / "journal.jsonl" for i in range(LANES)]
    with ThreadPoolExecutor(LANES) as pool:
        results = list(pool.map(_lane, paths, range(LANES)))
    total_trials = 0
    for path, (acked, _recovered) in zip(paths, results):  # any number of torn tails recovered is fine
        total_trials += TRIALS_PER_LANE
        rep = verify_chain(path)
        assert rep.ok, rep.problems
        ids = [e["id"] for e in Journal(path, read_only=True).events]
        missing = set(acked) - set(ids)
        assert not missing, f"{len(missing)} acknowledged decisions lost"
        assert rep.events >= len(acked)
        # the fold still works on the survivors
        assert fold(Journal(path, read_only=True).events).decisions
        # one write per event, but a SIGKILL may still stop that write where it crosses a
        # page of the file (the kernel checks for a fatal signal between pages): only the
        # killed writer's last, unacknowledged line can be torn, at the end, and the next
        # writer recovers it before it appends
        if rep.torn_tail is not None:
            assert rep.torn_tail.tail and rep.torn_tail.line > rep.events  # after every event
    assert total_trials >= 50
