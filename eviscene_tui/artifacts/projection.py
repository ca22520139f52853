"""The driver's ``trace_steps`` projection (psd-run-format §4.1).

Feedback (``repaired_steps``) carries each step of a teacher episode as ten
fields and no token captures: ``stage``, ``action_type``, ``tool_name``,
``tool_args``, ``tool_result``, ``thought``, ``output``, ``index``,
``policy_action`` and ``function_call_id``. Pure functions over raw (parsed
JSON) steps; tolerant of malformed input (a non-object step or metadata reads
as empty). No Textual import.
"""

from __future__ import annotations

from typing import Any, Mapping

#: The projection's keys, in the order :func:`trace_step` emits them.
TRACE_STEP_KEYS: tuple[str, ...] = (
    "stage",
    "action_type",
    "tool_name",
    "tool_args",
    "tool_result",
    "thought",
    "output",
    "index",
    "policy_action",
    "function_call_id",
)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def episode_steps(episode: Any) -> list[Any]:
    """``episode.state.all_steps`` when it is a list, else ``[]``."""
    steps = _map(_map(episode).get("state")).get("all_steps")
    return steps if isinstance(steps, list) else []


def trace_step(step: Any, index: int) -> dict[str, Any]:
    """One raw step as the ``trace_steps`` projection; ``index`` is its place in ``all_steps``.

    ``stage`` falls back to the teacher-step spelling ``stage_name``.
    """
    step = _map(step)
    meta = _map(step.get("metadata"))
    return {
        "stage": step.get("stage") or step.get("stage_name"),
        "action_type": step.get("action_type"),
        "tool_name": step.get("tool_name"),
        "tool_args": step.get("tool_args"),
        "tool_result": step.get("tool_result"),
        "thought": step.get("thought"),
        "output": step.get("output"),
        "index": index,
        "policy_action": meta.get("policy_action"),
        "function_call_id": meta.get("function_call_id"),
    }


def trace_steps(episode: Any, *, suffix_only: bool = False) -> list[dict[str, Any]]:
    """The projection of an episode's ``state.all_steps``.

    ``suffix_only`` keeps only the teacher's steps (``metadata.psd_suffix_step is True``);
    ``index`` is always the step's index in the whole ``all_steps`` list.
    """
    out = []
    for index, step in enumerate(episode_steps(episode)):
        if suffix_only and _map(_map(step).get("metadata")).get("psd_suffix_step") is not True:
            continue
        out.append(trace_step(step, index))
    return out
