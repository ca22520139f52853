"""A driver process that runs several searches at once (like the multi-case
canary wrapper): each search root gets its own sidecar and its own gates."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from eviscene_tui.gate.decide import decide
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.scaffold.standin import DRIVER_PATH, driver_args, write_inputs

from gate_fixtures import CLI, ENV, EXIT_TIMEOUT, wait_until


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
        assert proc.wait(timeout=EXIT_TIMEOUT) == 0, (tmp_path / "err").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "out").read_text().strip() == "['attempt_budget_exhausted', 'paused_execution_error']"
    for root in roots:
        assert (root.parent / (root.name + ".eviscene-gate") / "gate.json").is_file()


@pytest.mark.parametrize("package", ["ifv_training", "training.ifv_training"])
def test_upstream_and_nested_package_names_are_gated_too(tmp_path, package):
    import shutil

    copy = tmp_path / "upstream"
    shutil.copytree(DRIVER_PATH.parent, copy, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    target = copy.joinpath(*package.split("."))
    target.parent.mkdir(parents=True, exist_ok=True)
    (copy / "eviscene_training").rename(target)
    for parent in [target, *[p for p in target.parents if copy in p.parents]]:
        (parent / "__init__.py").write_text('"""stand-in, another package name"""\n')
    for path in [copy / "run_standin_driver.py", *target.glob("*.py")]:
        path.write_text(path.read_text(encoding="utf-8").replace("eviscene_training", package), encoding="utf-8")
    inputs = write_inputs(tmp_path / "inputs" / "case")
    root = tmp_path / "repairs" / "up"
    argv = [str(copy / "run_standin_driver.py"), *driver_args(inputs, root, extra=["--repair-attempts", "1", "--proposal-rounds", "1"])[1:]]
    with open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen([*CLI, "gate", "--", *argv], stdout=subprocess.DEVNULL, stderr=err, env=ENV)
    try:
        wait_until(_waiting(root, "round", 0), "the round-0 gate (ifv_training)")
        assert decide(root, "approve-round", 0).taken
        wait_until(_waiting(root, "hint", 0), "the hint gate (ifv_training)")
        assert decide(root, "reject-hint", 0, reason="not this one").taken
        assert proc.wait(timeout=EXIT_TIMEOUT) == 0, (tmp_path / "err").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert read_status(root).session["search_module"] == f"{package}.psd_repair_search"
