"""Starting the bundled driver for a case, or finding the one that runs (Textual-free).

The case screen's ``g`` calls :func:`plan_repair` and :func:`start_repair` from a worker:
a search whose driver is alive is attached to (its gate screen opens); a search that
stopped or paused is resumed under the gate; a case without one gets a new search.
The driver runs in its own process (``eviscene-tui repair``), detached from the app:
quitting the app leaves it waiting at its gate, and the next ``g`` attaches again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from eviscene_tui.artifacts.jsonio import read_bound
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.bundled import REPAIRS_DIR
from eviscene_tui.gate.launch import log_stamp, start_detached
from eviscene_tui.gate.sidecar import read_status
from eviscene_tui.journal.records import search_home
from eviscene_tui.options import AppOptions
from eviscene_tui.policy.profile import NO_POLICY, ProfileError


@dataclass(frozen=True)
class RepairPlan:
    """What ``g`` does for a case: ``attach`` to a running driver, else start ``argv``
    (``resume``: go on with the search in ``root``); ``refusal`` says why it cannot."""

    root: Path
    attach: bool
    resume: bool
    argv: tuple[str, ...]
    refusal: str = ""
    status: str = ""  # the search's status when one exists


def repair_argv(options: AppOptions, case_root: Path, root: Path, *, resume: bool) -> list[str]:
    argv = [sys.executable, "-m", "eviscene_tui", "repair", str(Path(case_root).absolute()), "--output-dir", str(root),
            "--workdir", str(Path(options.workdir).absolute()), "--operator", P.operator_identity(options.operator)]
    if options.policy_profile is not None:
        argv += ["--policy-profile", str(Path(options.policy_profile).absolute())]
    elif options.policy_url and options.policy_model:
        argv += ["--policy-url", options.policy_url, "--policy-model", options.policy_model]
    if options.hint_url and options.hint_model:
        argv += ["--hint-url", options.hint_url, "--hint-model", options.hint_model]
    if options.config is not None:
        argv += ["--config", str(Path(options.config).absolute())]
    for mapping in options.path_map_args:
        argv += ["--path-map", mapping]
    return argv + (["--resume"] if resume else [])


def search_status(root: Path) -> str:
    bound = read_bound(root / "search-state.json", verify=False)
    status = bound.payload.get("status") if isinstance(bound.payload, dict) else None
    return status if isinstance(status, str) else ""


def plan_repair(options: AppOptions, case_root: Path) -> RepairPlan:
    """File reads only (the sidecar's heartbeat, the search state)."""
    # the case's search wherever the app started it (any work directory of its records),
    # else a new one keyed by its record key in this work directory
    _home, root = search_home(case_root, options.workdir, options.record_workdirs(case_root), folder=REPAIRS_DIR, opened=options.root)
    status = search_status(root)
    gate = read_status(root)
    if gate.driver.alive:
        return RepairPlan(root, attach=True, resume=False, argv=(), status=status)
    if status in P.TERMINAL_STATUSES:
        return RepairPlan(root, attach=True, resume=False, argv=(), status=status)  # nothing to run: its gate screen shows how it ended
    try:  # the one policy rule (a bad profile or a half pair reads as everywhere else)
        target = options.policy_target()
    except ProfileError as exc:
        return RepairPlan(root, attach=False, resume=False, argv=(), refusal=str(exc), status=status)
    if target is None:
        return RepairPlan(root, attach=False, resume=False, argv=(), refusal=NO_POLICY, status=status)
    resume = bool(status)
    return RepairPlan(root, attach=False, resume=resume, argv=tuple(repair_argv(options, case_root, root, resume=resume)), status=status)


def start_repair(plan: RepairPlan) -> tuple[subprocess.Popen[bytes], Path]:
    """Start the driver (detached: its own session; its output in a log beside its root)."""
    plan.root.parent.mkdir(parents=True, exist_ok=True)
    log = plan.root.parent / f"{plan.root.name}.repair-{log_stamp()}-{os.getpid()}.log"
    return start_detached(plan.argv, log), log
