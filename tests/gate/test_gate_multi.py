"""A driver process that runs several searches at once (like the multi-case
canary wrapper): each search root gets its own sidecar and its own gates."""

from __future__ import annotations

import subprocess
import textwrap

from eviscene_tui.gate.decide import decide
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.gate.standin import DRIVER_PATH, driver_args, write_inputs

from gate_fixtures import CLI, ENV, wait_until


def _waiting(root, kind, round_index):
    def check():
        st = read_status(root)
        return any(p.kind == kind and p.round == round_index and st.driver.waiting == p.name for p in st.pending)

    return check


def test_two_searches_in_one_driver_process(tmp_path):
    inputs = write_inputs(tmp_path / "inputs" / "case")
    roots = [tmp_path / "repairs" / "a", tmp_path / "repairs" / "b"]
    argvs = [driver_args(inputs, r, extra=["--repair-attempts", "1", "--proposal-rounds", "1"])[1:] for r in roots]
    wrapper = tmp_path / "canary.py"
    wrapper.write_text(textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(DRIVER_PATH.parent)!r})
        import run_standin_driver as d
        async def main():
            results = await asyncio.gather(*(d._run(d._parser().parse_args(a)) for a in {argvs!r}))
            print([r["status"] for r in results])
        asyncio.run(main())
    """))
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen([*CLI, "gate", "--no-hint-gate", "--", str(wrapper)], stdout=out, stderr=err, env=ENV)
    try:
        for root in roots:
            wait_until(_waiting(root, "round", 0), f"the round-0 gate of {root.name}")
        assert decide(roots[1], "stop", 0).taken
        assert decide(roots[0], "approve-round", 0).taken
        assert proc.wait(timeout=60) == 0, (tmp_path / "err").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "out").read_text().strip() == "['attempt_budget_exhausted', 'paused_execution_error']"
    for root in roots:
        assert (root.parent / (root.name + ".eviscene-gate") / "gate.json").is_file()
