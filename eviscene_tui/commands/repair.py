"""``eviscene-tui repair CASE_PATH``: the bundled driver, always under the operator gate.

    eviscene-tui repair CASE_PATH [--output-dir DIR] [--workdir W]
        [--policy-profile F | --policy-url URL --policy-model NAME]
        [--hint-url URL --hint-model NAME] [--operator NAME] [--resume]

Runs a feedback search from an existing case (its source trace, localization and
archived failure-step request) in the driver's own layout, in this process: its
round, hint and attempt gates are in the sidecar ``<DIR>.eviscene-gate`` exactly as
``eviscene-tui gate -- DRIVER.py`` writes them for the real driver, decided with
``eviscene-tui decide`` or in the app. The first line of output is
``search root: DIR`` (default ``<work dir>/repairs/<case key>``, the work directory
being the one the app uses for the case); while it waits it prints one line per
gate on stderr; at the end the search manifest as JSON. Exit 0 when the search
ran (ended, paused or stopped: its manifest says which), 1 when it could not
start (a locked root, a root that holds a search without ``--resume``), 2 for
bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from eviscene_tui.artifacts.case import load_case
from eviscene_tui.cli import UsageError, add_hint_arguments, add_path_map_argument, add_policy_arguments, path_map_from_args, policy_target_from_args
from eviscene_tui.gate import inproc
from eviscene_tui.gate.bundled import REPAIRS_DIR, repair_label
from eviscene_tui.gate import protocol as P
from eviscene_tui.gate.bundled.continuation import PolicyContinuationRunner
from eviscene_tui.gate.bundled.driver import BundledDriver
from eviscene_tui.gate.bundled.source import InputError, inputs_from_case
from eviscene_tui.gate.bundled.stages import Budgets, SearchError, SearchSettings
from eviscene_tui.journal.records import record_key, register_workdir, search_home
from eviscene_tui.options import AppOptions
from eviscene_tui.policy.config import policy_config
from eviscene_tui.safe_text import safe_text, terminal_json
from eviscene_tui.settings import load_settings
from eviscene_tui.storage import EvidenceWriteRefused, WorkDir



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("case_path", help="the case to repair (a driver search root or run directory)")
    parser.add_argument("--output-dir", help="the search root (default: <work dir>/repairs/<case key>)")
    parser.add_argument("--workdir", help="the app's work directory (default: the one the app uses for the case)")
    add_policy_arguments(parser)
    add_hint_arguments(parser)
    parser.add_argument("--operator", help="who started the search (default: $EVISCENE_OPERATOR, else the login name)")
    parser.add_argument("--resume", action="store_true", help="go on with the search in --output-dir (decisions taken are replayed)")
    parser.add_argument("--config", help="config file ([policy] and [supervised] budgets)")
    add_path_map_argument(parser)


def resume_argv(args: argparse.Namespace, root: Path) -> list[str]:
    """The command that resumes this search (the gate's session file records it)."""
    argv = [sys.executable, "-m", "eviscene_tui", "repair", os.path.abspath(args.case_path), "--output-dir", str(root), "--resume"]
    for flag in ("workdir", "policy_profile", "policy_url", "policy_model", "hint_url", "hint_model", "operator", "config"):
        value = getattr(args, flag, None)
        if value:
            argv += [f"--{flag.replace('_', '-')}", os.path.abspath(value) if flag in ("workdir", "policy_profile", "config") else value]
    for mapping in getattr(args, "path_map", None) or []:
        argv += ["--path-map", mapping]
    return argv


def build(args: argparse.Namespace) -> tuple[BundledDriver, Path]:
    """The driver for these arguments (nothing written yet); :class:`UsageError` for bad usage."""
    case_root = Path(args.case_path)
    if not case_root.is_dir():
        raise UsageError(f"{args.case_path} is not a case folder")
    settings = load_settings(args.config)
    for problem in settings.problems:
        print(safe_text(problem, single_line=True), file=sys.stderr)
    options = AppOptions.from_args(case_root, args, settings=settings)
    target = policy_target_from_args(args)
    if bool(args.hint_url) != bool(args.hint_model):
        raise UsageError("--hint-url and --hint-model go together")
    case = load_case(case_root, path_map=path_map_from_args(args, settings))
    label = repair_label(case.root, options.key_root)
    try:
        inputs = inputs_from_case(case, label=label)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if args.output_dir:
        root = Path(args.output_dir).absolute()
    else:
        _home, root = search_home(case.root, options.workdir, options.record_workdirs(case.root), folder=REPAIRS_DIR, opened=options.root)
    try:
        work = WorkDir(options.workdir if root.is_relative_to(options.workdir) else root.parent, evidence_roots=[case.root])
        work.guard(root)
    except EvidenceWriteRefused as exc:
        raise UsageError(str(exc)) from None
    if root.parent.name == REPAIRS_DIR:  # found again from any folder the app is opened on
        register_workdir(root.parent.parent, record_key(case.root), case.root)
    operator = P.operator_identity(args.operator)
    search = SearchSettings(operator=operator, policy_model=target.model, policy_base_url=target.base_urls[0] if target.base_urls else None,
                            policy_profile=Path(args.policy_profile) if args.policy_profile else None,
                            policy_temperature=settings.policy.temperature, hint_url=args.hint_url, hint_model=args.hint_model)
    budgets = Budgets.from_settings(settings.supervised)
    gate = inproc.Gate(gate_dir=None, operator=operator, hint_gate=False, argv=[sys.executable, "-m", "eviscene_tui", "repair", *sys.argv[2:]],
                       driver="bundled", resume_argv=resume_argv(args, root))
    runner = PolicyContinuationRunner(target, policy_config(settings.policy), work=WorkDir(options.workdir, evidence_roots=[case.root]))
    return BundledDriver(inputs, root, work, settings=search, budgets=budgets, runner=runner, gate=gate), root


def run(args: argparse.Namespace) -> int:
    driver, root = build(args)
    print(safe_text(f"search root: {root}", single_line=True), flush=True)
    try:
        result = asyncio.run(driver.run(resume=args.resume))
    except (SearchError, inproc.GateError, OSError) as exc:
        driver.gate.finish(1)
        print(safe_text(f"eviscene-tui repair: {exc}", single_line=True), file=sys.stderr)
        return 1
    except BaseException:
        driver.gate.finish(1)
        raise
    driver.gate.finish(0)
    sys.stdout.flush()
    sys.stdout.buffer.write(terminal_json(result, indent=True) + b"\n")
    return 0
