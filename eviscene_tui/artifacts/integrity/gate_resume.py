"""A search the operator gate changed can only be resumed under the gate.

When the gate relocalized a round (``<root>.eviscene-gate/applied/round-NN.json``
says ``relocalize``), the round's inputs hold the gate's feedback, not the one the
driver computes from its history; a plain ``--resume`` then fails the driver's
"search child input changed on resume" check, and the search pauses with a
``ValueError``. :func:`gate_resume_note` says so with the command that resumes it
(the sidecar's own files are read, never written; this floor reads them as JSON).
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from eviscene_tui.artifacts.integrity.reading import as_dict, read_json
from eviscene_tui.artifacts.problems import ProblemCode

SIDECAR_SUFFIX = ".eviscene-gate"  # the gate protocol's sidecar (eviscene_tui.gate.protocol)


def gate_resume_command(session: dict[str, Any], gate_dir: str) -> str:
    """The command that resumes the gated search ``session`` (its ``gate.json``) under the gate."""
    declared = session.get("resume_argv")
    if isinstance(declared, list) and declared and all(isinstance(a, str) for a in declared):
        return shlex.join(declared)
    argv = [str(a) for a in session.get("argv") or []]
    if "--resume" not in argv:
        argv.append("--resume")
    return shlex.join(["eviscene-tui", "gate", "--gate-dir", gate_dir, "--", *argv])


def gate_resume_note(root: str) -> str | None:
    """The message for a root in that state, or None."""
    gate_dir = os.path.normpath(os.path.abspath(root)) + SIDECAR_SUFFIX
    if not os.path.isfile(os.path.join(gate_dir, "gate.json")):
        return None
    manifest, _ = read_json(os.path.join(root, "manifest.json"))
    error = as_dict(as_dict(manifest).get("execution_error"))
    index = error.get("round")
    if as_dict(manifest).get("status") != "paused_execution_error" or error.get("type") != "ValueError" or not isinstance(index, int):
        return None
    applied, _ = read_json(os.path.join(gate_dir, "applied", f"round-{index:02d}.json"))
    if as_dict(applied).get("action") != "relocalize":
        return None
    session, _ = read_json(os.path.join(gate_dir, "gate.json"))
    return (f"round {index} was relocalized under the operator gate, so a plain --resume fails the driver's "
            f"'search child input changed on resume' check (the search paused with a ValueError); resume it under the gate: "
            f"{gate_resume_command(as_dict(session), gate_dir)}")


def check_gate_resume(ctx: Any) -> None:
    note = gate_resume_note(ctx.root)
    if note is not None:
        ctx.add(ProblemCode.GATE_RESUME_REQUIRED, os.path.join(ctx.root, "manifest.json"), note)
