"""Bound inputs: the ``{path, sha256}`` bindings a search's ``inputs``, a run config and a
wrapper's ``inputs.json`` record (source trace, candidate, gold, ...). Each is read wherever
the path rules find it (``artifacts.paths``) and its sha256 verified."""

from __future__ import annotations

import os

from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import as_dict, as_list, join, safe_read_bound
from eviscene_tui.artifacts.schemas import RUN_FILE_ARGUMENTS
from eviscene_tui.artifacts.paths import INPUT_WHAT

# run-inputs identity keys that hold {path, sha256} file bindings (§2.2)
FILE_ARGS = RUN_FILE_ARGUMENTS


def _slice(binding: dict[str, object]) -> tuple[int, int] | None:
    """The ``(offset, length)`` of an indexed input binding, when both are valid."""
    off, length = binding.get("offset"), binding.get("length")
    if type(off) is int and type(length) is int and off >= 0 and length >= 0:
        return (off, length)
    return None


class BoundInputs:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx

    def search(self, inputs: dict[str, object], state_path: str) -> None:
        """The search identity's ``inputs`` bindings (``output_dir`` is not one)."""
        for key, value in sorted(inputs.items()):
            if key == "output_dir" or not isinstance(value, dict):
                continue
            if isinstance(value.get("path"), str) and "sha256" in value:
                self.ctx.refs.bound_input(
                    value.get("path"), value.get("sha256"), referrer=state_path,
                    what=f"{INPUT_WHAT.get(key, key)} (search input {key})", key=key,
                )

    def run(self, identity: dict[str, object], inputs_path: str) -> None:
        """The run config's file arguments. An indexed run (``candidate_offset``) binds
        the frozen ``source_trace_sha256`` of the candidate under ``trace``, not a file hash."""
        indexed = identity.get("candidate_offset") is not None
        for key in FILE_ARGS:
            value = identity.get(key)
            if not isinstance(value, dict) or not isinstance(value.get("path"), str):
                continue
            if key == "trace" and indexed:
                continue
            self.ctx.refs.bound_input(
                value.get("path"), value.get("sha256"), referrer=inputs_path,
                what=f"{INPUT_WHAT.get(key, key)} (run input {key})", slice_=_slice(value), key=key,
            )

    def wrapper_case(self) -> None:
        """The wrapper's ``case-inputs/<key>/`` files parse, and the ``{path, sha256}``
        bindings its ``inputs.json`` records for this case (candidate, gold, public) still
        hold."""
        ctx = self.ctx
        wrapper, key = ctx.wrapper, ctx.ref.key
        if wrapper is None or not key:
            return
        for path in ctx.tree.list_files(join(wrapper, "case-inputs", key)):
            if path.endswith(".json"):
                ctx.files.json_file(path, obj=False)
        inputs_path = join(wrapper, "inputs.json")
        if not os.path.isfile(inputs_path):
            return
        bound = safe_read_bound(inputs_path)  # its own problems are reported once, for the wrapper
        identity = as_dict(bound.identity)
        if isinstance(identity.get("output_dir"), str):
            ctx.paths.add_written(identity["output_dir"], wrapper)
        for row in as_list(as_dict(bound.payload).get("cases")):
            row = as_dict(row)
            if row.get("key") == key:
                self._case_row(row, inputs_path)

    def _case_row(self, row: dict[str, object], inputs_path: str) -> None:
        for name in ("candidate", "gold", "public"):
            binding = as_dict(row.get(name))
            if isinstance(binding.get("path"), str):
                self.ctx.refs.bound_input(binding["path"], binding.get("sha256"), referrer=inputs_path,
                                          what=f"wrapper case input {name}", key=f"case_inputs.{name}")
