"""Command line entry point. Textual is imported only when the app opens, so
``--help`` and the headless commands start fast.

    eviscene-tui [PATH] [--theme NAME] [--poll] [--operator NAME] [--workdir DIR] ...
    eviscene-tui check PATH [--json]
    eviscene-tui stream CASE_PATH [...]
    eviscene-tui decisions PATH [--workdir DIR] [--json | --csv] [--events]
    eviscene-tui labels PATH [--workdir DIR] [--csv | --json]
    eviscene-tui fake-vllm [--port N] [...]
    eviscene-tui demo [PATH]
    eviscene-tui gate [--python PY] [--gate-dir DIR] [--no-hint-gate] -- DRIVER.py ARGS...
    eviscene-tui gate-status ROOT [--json]
    eviscene-tui decide ROOT ACTION --round N [--step K] [--reason TEXT]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from eviscene_tui.storage import WORKDIR_RULE

if TYPE_CHECKING:
    from eviscene_tui.artifacts.paths import PathMap
    from eviscene_tui.policy.profile import PolicyTarget
    from eviscene_tui.settings import Settings

# name -> (module, one-line help). Each module exposes ``add_arguments(parser)`` and ``run(args) -> int``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "check": ("eviscene_tui.commands.check", "headless triage and integrity report for every case under PATH"),
    "stream": ("eviscene_tui.commands.stream", "stream a hinted teacher continuation for a case without the UI"),
    "decisions": ("eviscene_tui.commands.decisions", "export the operator decision journal (folded or raw chain)"),
    "labels": ("eviscene_tui.commands.labels", "export one row per case with its current triage label (CSV / JSON for a dataset)"),
    "fake-vllm": ("eviscene_tui.scaffold.commands.fake_vllm", "run the bundled vLLM-compatible fake server"),
    "demo": ("eviscene_tui.scaffold.commands.demo", "start the fake vLLM server and open the app on sample runs"),
    "gate": ("eviscene_tui.commands.gate", "run the EviScene driver with the operator gate in its feedback search"),
    "gate-status": ("eviscene_tui.commands.gate_status", "show a gated search's pending gates, decisions and driver heartbeat"),
    "decide": ("eviscene_tui.commands.decide", "take a gate decision (approve-round, relocalize, stop, approve-hint, add-hint, …)"),
    "repair": ("eviscene_tui.commands.repair", "run the bundled driver on a case, under the operator gate"),
}


class UsageError(Exception):
    """Bad usage: exit 2 with a one-line message."""


def terminal_refusal() -> str | None:
    """Why the full-screen app cannot open here, or None. Without a TTY it would write
    escape codes into a pipe and spin on a stdin that never answers (the app and `demo`)."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return None
    return ("the app needs a terminal (stdin and stdout must be a TTY); "
            "without one use a headless command, e.g. `eviscene-tui check PATH` (see --help)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no traceback
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_path_map_argument(parser: argparse.ArgumentParser) -> None:
    """``--path-map OLD=NEW`` (repeatable), shared by the app, ``check`` and ``stream``."""
    parser.add_argument("--path-map", action="append", default=[], metavar="OLD=NEW",
                        help="look for recorded paths under OLD at NEW instead (repeatable; a moved tree, or inputs copied elsewhere; see the README, Paths)")


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    """The policy server's flags, shared by the app, ``stream`` and ``repair``: a serving
    profile (attested), or a URL and a model name (unattested). One rule reads them:
    ``policy.profile.resolve_policy_target`` (:func:`policy_target_from_args`)."""
    parser.add_argument("--policy-profile", help="serving profile (ifv-qwen-serving-profile-v1) of the policy server: attested continuations")
    parser.add_argument("--policy-url", help="policy base URL for unattested continuations (with --policy-model)")
    parser.add_argument("--policy-model", help="served model name for unattested continuations (with --policy-url)")


def add_hint_arguments(parser: argparse.ArgumentParser) -> None:
    """The hint constructor's flags, shared by the app (it hands them to the searches it
    starts) and ``repair``: an OpenAI-compatible server that proposes hints each round."""
    parser.add_argument("--hint-url", help="OpenAI-compatible hint constructor base URL (with --hint-model): it proposes hints each round")
    parser.add_argument("--hint-model", help="the hint constructor's model name (with --hint-url)")


def policy_target_from_args(args: argparse.Namespace) -> PolicyTarget:
    """The policy server the flags name; a bad profile, half a pair or no policy at all is
    a usage error (one line)."""
    from eviscene_tui.policy.profile import NO_POLICY, ProfileError, resolve_policy_target  # lazy: only a command that streams reads the flags, so --help stays fast

    try:
        target = resolve_policy_target(profile=args.policy_profile, url=args.policy_url, model=args.policy_model)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    if target is None:
        raise UsageError(NO_POLICY)
    return target


def path_map_from_args(args: argparse.Namespace, settings: Settings | None = None) -> PathMap:
    """The ``--path-map`` values then the config file's ``[paths] map``; a malformed
    value is a usage error."""
    from eviscene_tui.options import path_map_for  # lazy: the settings (pydantic) load only once a path is opened, so --help stays fast

    try:
        return path_map_for(getattr(args, "path_map", None) or (), settings)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def add_app_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="folder to open (default: ./sample_runs when present, else .)")
    parser.add_argument("--theme", help="colour theme (eviscene-dark, eviscene-light, or any Textual theme)")
    add_path_map_argument(parser)
    parser.add_argument("--poll", action="store_true", help="use a polling file watcher (network filesystems)")
    parser.add_argument("--operator", help="operator name recorded with decisions")
    parser.add_argument("--workdir", help=f"the app's own directory; {WORKDIR_RULE}")
    add_policy_arguments(parser)
    add_hint_arguments(parser)
    parser.add_argument("--tokenizer", help="tokenizer.json (or its folder) for decoding token ids")
    parser.add_argument("--config", help="config file (default: $EVISCENE_TUI_CONFIG or the XDG config dir)")


def commands_epilog() -> str:
    """The subcommands, one line each (as ``git --help`` lists its commands)."""
    width = max(len(name) for name in SUBCOMMANDS) + 2
    lines = ["commands:"]
    lines.extend(f"  {name:<{width}}{help_}" for name, (_, help_) in SUBCOMMANDS.items())
    return "\n".join(lines)


def _build_app_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="eviscene-tui",
        usage="eviscene-tui [PATH] [options]\n       eviscene-tui COMMAND [args]",
        description="Terminal workbench for EviScene PSD repair searches.\n\n" + commands_epilog(),
        epilog="Without a command the app opens PATH. 'eviscene-tui COMMAND --help' shows a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_app_arguments(parser)
    parser.add_argument("--version", action="version", version=f"eviscene-tui {package_version()}")
    return parser


def package_version() -> str:
    """The installed distribution's version (the package's own when not installed)."""
    from importlib.metadata import PackageNotFoundError, version  # lazy: only --version asks

    try:
        return version("eviscene-tui")
    except PackageNotFoundError:
        from eviscene_tui import __version__  # lazy: the source tree's version when run uninstalled

        return __version__


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (``| head``): exit quietly, as Unix tools do.
    stdout is pointed at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (captured in tests)
        pass
    return 0


def resolve_open_path(given: str | None) -> Path:
    if given:
        return Path(given)
    default = Path("sample_runs")
    return default if default.is_dir() else Path(".")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        name = argv[0]
        module_name, help_ = SUBCOMMANDS[name]
        module = importlib.import_module(module_name)
        parser = _Parser(prog=f"eviscene-tui {name}", description=help_)
        module.add_arguments(parser)
        args = parser.parse_args(argv[1:])
        try:
            code = int(module.run(args) or 0)
            sys.stdout.flush()
            return code
        except BrokenPipeError:
            return _quiet_broken_pipe()
        except UsageError as exc:
            print(f"eviscene-tui {name}: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return 130
    args = _build_app_parser().parse_args(argv)
    try:
        path_map_from_args(args)
    except UsageError as exc:
        print(f"eviscene-tui: error: {exc}", file=sys.stderr)
        return 2
    path = resolve_open_path(args.path)
    if not path.exists():
        print(f"eviscene-tui: error: {path} does not exist", file=sys.stderr)
        return 2
    if not path.is_dir():
        print(f"eviscene-tui: error: {path} is not a directory (open the folder that holds the run, or use `eviscene-tui check`)", file=sys.stderr)
        return 2
    refusal = terminal_refusal()
    if refusal is not None:
        print(f"eviscene-tui: error: {refusal}", file=sys.stderr)
        return 2
    from eviscene_tui.ui.launch import run_app  # lazy: Textual loads only here

    return int(run_app(path, args) or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
