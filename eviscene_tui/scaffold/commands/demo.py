"""``eviscene-tui demo [PATH]``: the app on sample runs, with a bundled fake policy server.

0. without ``PATH``, open the demo's own samples: built on the first run (and again when
   the installed package changes) in the user's data directory
   (``scaffold.samples.home``: ``$XDG_DATA_HOME/eviscene-tui/sample_runs``, else
   ``~/.local/share/eviscene-tui/sample_runs``), by the generator ``make samples`` runs;
   the first line printed says where (``make demo`` in a checkout opens ``sample_runs/``);
1. start the fake vLLM server on a free loopback port (a background thread,
   stopped when the app exits) serving ``PATH/serving-profile.json`` (the sample
   profile) — or a built-in profile when there is none;
2. write a copy of that profile with the fake's ``base_url`` into the work
   directory (a new file; the evidence root is never touched);
3. start the scripted demo hint constructor (``scaffold.fake_vllm.hints``), an
   OpenAI-compatible endpoint answering ``{"hints": [...]}``, so the bundled driver
   proposes hints without a model;
4. start a gated search: the bundled driver (``eviscene-tui repair``) on the sample
   case ``feedback-converged-3-rounds``, in the work directory (``demo/gated-repair/``,
   the same folder every start: the previous demo's is cleaned), its continuations
   streamed by the fake vLLM. It is a row of the runs screen (``awaiting operator``,
   filter ``w``); ``G`` on that row opens its gate, where every gate kind comes in
   turn (approve or relocalize the round, approve / reject / add a hint, watch the
   stream and cancel it, accept or reject the attempt, stop, ``R`` resume); it is
   stopped when the app exits;
5. open the app (``eviscene_tui.ui.launch.run_app``) with ``policy_profile``
   pointing at the copy, so live teacher continuations are attested and stream
   without a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.cli import UsageError, terminal_refusal
from eviscene_tui.storage import WORKDIR_RULE, EvidenceWriteRefused, WorkDir, choose_workdir, unique_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="folder to open (default: the demo's own samples, built on the first run in "
                        "<user data dir>/eviscene-tui/sample_runs)")
    parser.add_argument("--personality", choices=("v0.11", "nightly"), default="nightly", help="which vLLM build the fake imitates")
    parser.add_argument("--scenario", help="scenario JSON for the fake server")
    parser.add_argument("--tokens-per-second", type=float, default=300.0, help="fake generation speed (default 300)")
    parser.add_argument("--workdir", help=f"the app's own directory; {WORKDIR_RULE}")
    parser.add_argument("--theme", help="colour theme")
    parser.add_argument("--operator", help="operator name recorded with decisions")
    parser.add_argument("--poll", action="store_true", help="polling file watcher")
    parser.add_argument("--config", help="config file")


def demo_profile(root: Path) -> dict[str, Any]:
    from eviscene_tui.scaffold.fake_vllm.server import DEFAULT_PROFILE  # lazy: Starlette and the tokenizer load when the demo starts

    for candidate in (root / "serving-profile.json", root / "inputs" / "serving-profile.json"):
        if candidate.is_file():
            try:
                data = orjson.loads(candidate.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            if isinstance(data, dict) and data.get("profile_id"):
                return data
    return dict(DEFAULT_PROFILE)


def _own_samples() -> Path:
    """The demo's own samples (built first when this version has not built them), said
    in the first line the demo prints."""
    from eviscene_tui.scaffold.samples.home import ensure_samples, generator_digest, home_dir, is_current  # lazy: as in run

    home = home_dir()
    how = "built on an earlier run" if is_current(home, generator_digest()) else "building them now (the first run of this version)"
    print(f"sample runs: {home} ({how}; the same files as `make samples` writes in a checkout)", file=sys.stderr, flush=True)
    try:
        return ensure_samples(home).path
    except OSError as exc:
        raise UsageError(f"cannot build the demo's samples in {home}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from eviscene_tui.scaffold.fake_vllm.harness import FakeVLLMServer  # lazy: the servers load when the demo starts, so `demo --help` stays fast
    from eviscene_tui.scaffold.fake_vllm.server import load_scenario  # lazy: as above
    from eviscene_tui.scaffold.gated_demo import DEMO_CASE, start_gated_demo  # lazy: as above
    from eviscene_tui.scaffold.fake_vllm.hints import DemoHintServer  # lazy: as above
    from eviscene_tui.scaffold.samples.home import home_dir  # lazy: as above (and the sample generator)
    from eviscene_tui.settings import load_settings  # lazy: as above

    if args.path is not None and not Path(args.path).exists():
        raise UsageError(f"{args.path} does not exist (without a PATH the demo opens its own samples, built in {home_dir()})")
    refusal = terminal_refusal()
    if refusal is not None:  # before anything is built or started
        raise UsageError(refusal)
    root = Path(args.path) if args.path is not None else _own_samples()
    try:
        scenario = load_scenario(args.scenario)
    except (OSError, ValueError) as exc:
        raise UsageError(f"bad scenario {args.scenario}: {exc}") from None
    if args.tokens_per_second and not args.scenario:
        scenario["tokens_per_second"] = args.tokens_per_second
    profile = demo_profile(root)
    settings = load_settings(args.config)
    workdir, why = choose_workdir(root, args.workdir, settings.paths.workdir)
    try:
        work = WorkDir(workdir, evidence_roots=[root])
    except EvidenceWriteRefused as exc:
        raise UsageError(str(exc)) from None
    print(f"work directory: {work.path} ({why})", file=sys.stderr)  # where the demo and the app write, before they do
    server = FakeVLLMServer(personality=args.personality, scenario=scenario, profile=profile, replace_scenario=True)
    server.start()
    hints = DemoHintServer().start()
    gated = None
    try:
        prof = server.profile_dict()
        prof_path = work.write_new(work.sub("demo", unique_name("serving-profile-demo", ".json")), orjson.dumps(prof, option=orjson.OPT_INDENT_2) + b"\n")
        print(f"fake vLLM ({args.personality}) on {server.v1_url}; profile {prof_path}", file=sys.stderr)
        print(f"demo hint constructor on {hints.v1_url}", file=sys.stderr)
        # a gated search: the bundled driver (`eviscene-tui repair`) on a sample case (G on the runs screen)
        case = root / DEMO_CASE
        if case.is_dir():
            gated = start_gated_demo(work.sub("demo"), case, workdir=workdir, policy_profile=prof_path, hint_url=hints.v1_url,
                                     hint_model="demo-hint-constructor", operator=args.operator)
            print(f"gated search: the bundled driver (eviscene-tui repair) on {case.name} at {gated.root}: its row on the runs "
                  f"screen is 'awaiting operator' (w filters), G opens its gate; headless: eviscene-tui gate-status {gated.root}",
                  file=sys.stderr)
        app_args = argparse.Namespace(
            path=str(root), theme=args.theme, poll=args.poll, operator=args.operator, workdir=str(workdir),
            policy_profile=str(prof_path), policy_url=None, policy_model=None, hint_url=hints.v1_url, hint_model="demo-hint-constructor",
            tokenizer=None, config=args.config, gate_roots=[str(gated.root)] if gated is not None else [],
        )
        from eviscene_tui.ui.launch import run_app  # lazy: Textual loads only when the app opens

        return int(run_app(root, app_args) or 0)
    finally:
        if gated is not None:
            gated.stop()
        hints.stop()
        server.stop()
