"""``eviscene-tui fake-vllm``: run the bundled vLLM-compatible fake server (foreground).

    eviscene-tui fake-vllm [--port N] [--host 127.0.0.1] [--scenario FILE]
                           [--personality v0.11|nightly] [--api-key K] [--profile FILE]

``/v1/models`` serves one row from the profile (id = profile_id, root =
engine_model_path or model_path, max_model_len = context_length). Scenario keys
(fault injection, pacing, scripted text) are listed in
``eviscene_tui/scaffold/fake_vllm/server.py``. The API key can also come from
``$EVISCENE_FAKE_VLLM_API_KEY``; it is never printed.
"""

from __future__ import annotations

import argparse
import os
import sys

import orjson

from eviscene_tui.cli import UsageError
from eviscene_tui.scaffold.loopback import free_loopback_socket


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one, printed at start)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--scenario", help="scenario JSON file (scripted text, pacing, faults)")
    parser.add_argument("--personality", choices=("v0.11", "nightly"), default="nightly", help="which vLLM build to imitate")
    parser.add_argument("--api-key", help="require this bearer key on /v1/* (or $EVISCENE_FAKE_VLLM_API_KEY)")
    parser.add_argument("--profile", help="serving profile whose alias/root/context length /v1/models reports")
    parser.add_argument("--log-level", default="warning", help="uvicorn log level")


def run(args: argparse.Namespace) -> int:
    import uvicorn  # lazy: the server stack loads when it starts, so `fake-vllm --help` stays fast

    from eviscene_tui.scaffold.fake_vllm.server import (  # lazy: Starlette and the tokenizer load when the server starts
        DEFAULT_PROFILE, FakeConfig, FakeRecorder, create_app, load_scenario,
    )

    try:
        scenario = load_scenario(args.scenario)
    except FileNotFoundError:
        raise UsageError(f"scenario file not found: {args.scenario}") from None
    except (orjson.JSONDecodeError, ValueError, OSError) as exc:
        raise UsageError(f"bad scenario file {args.scenario}: {exc}") from None
    profile = dict(DEFAULT_PROFILE)
    if args.profile:
        try:
            data = orjson.loads(open(args.profile, "rb").read())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise UsageError(f"cannot read profile {args.profile}: {exc}") from None
        if not isinstance(data, dict):
            raise UsageError(f"profile {args.profile} is not a JSON object")
        profile.update(data)
    if not 0 <= args.port <= 65535:
        raise UsageError("--port must be 0..65535")
    api_key = args.api_key or os.environ.get("EVISCENE_FAKE_VLLM_API_KEY") or None
    cfg = FakeConfig(personality=args.personality, api_key=api_key, profile=profile, scenario=scenario)
    try:
        sock = free_loopback_socket(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot bind {args.host}:{args.port}: {exc.strerror}") from None
    port = sock.getsockname()[1]
    print(f"fake vLLM ({args.personality}) serving {cfg.alias} on http://{args.host}:{port}/v1"
          f"{' (API key required on /v1/*)' if api_key else ''}", flush=True)
    server = uvicorn.Server(uvicorn.Config(create_app(cfg, FakeRecorder()), log_level=args.log_level, access_log=False, lifespan="off", timeout_graceful_shutdown=2))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    print("fake vLLM stopped", file=sys.stderr)
    return 0
