"""Serving profiles, ``ifv-qwen-serving-profile-v1`` (psd-run-format §5).

``load_profile(path)`` never raises. The returned :class:`ServingProfile` offers
``base_urls()`` (the ``base_urls`` list extension and/or ``base_url``, trailing ``/``
stripped) and ``expected_root()`` (``engine_model_path`` or ``model_path``), which the
live ``/v1/models`` gate compares against.

No Textual import here.
"""

from __future__ import annotations

import os
from typing import Any

from eviscene_tui.artifacts.jsonio import read_json
from eviscene_tui.artifacts.models import SCHEMA_SERVING_PROFILE, ServingProfile, parse_model
from eviscene_tui.artifacts.problems import Problem, ProblemCode


def profile_from_dict(raw: Any, path: str = "<profile>") -> tuple[ServingProfile | None, list[Problem]]:
    model, problems = parse_model(ServingProfile, raw, path, what="serving profile")
    if model is None:
        if not problems:
            problems = [Problem(code=ProblemCode.JSON_INVALID, path=path, message="serving profile: empty")]
        return None, problems
    if model.schema_version != SCHEMA_SERVING_PROFILE:
        problems.append(
            Problem(
                code=ProblemCode.SCHEMA_UNKNOWN,
                path=path,
                message=f"serving profile schema_version is {model.schema_version!r}, expected {SCHEMA_SERVING_PROFILE!r}",
            )
        )
    if not model.base_urls():
        problems.append(Problem(code=ProblemCode.JSON_INVALID, path=path, message="serving profile has no base_url"))
    if not model.profile_id:
        problems.append(Problem(code=ProblemCode.JSON_INVALID, path=path, message="serving profile has no profile_id"))
    return model, problems


def load_profile(path: str | os.PathLike[str]) -> tuple[ServingProfile | None, list[Problem]]:
    """Read a serving profile file. Missing/invalid -> ``(None, problems)``."""
    raw, problems = read_json(path)
    if raw is None:
        return None, problems
    model, more = profile_from_dict(raw, str(path))
    return model, problems + more


__all__ = ["ServingProfile", "load_profile", "profile_from_dict"]
