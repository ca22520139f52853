"""Problems: what the artifact layer reports instead of raising."""

from __future__ import annotations

import os
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class ProblemCode(StrEnum):
    JSON_INVALID = "json_invalid"
    JSONL_TORN_LINE = "jsonl_torn_line"
    BOUND_HASH_MISMATCH = "bound_hash_mismatch"
    FILE_HASH_MISMATCH = "file_hash_mismatch"
    MISSING_ARTIFACT = "missing_artifact"
    PATH_OUTSIDE_ROOT = "path_outside_root"
    LEFTOVER_TMP = "leftover_tmp"
    TOKEN_CAPTURE_INCOMPLETE = "token_capture_incomplete"
    MEDIA_MISMATCH = "media_mismatch"
    SCHEMA_UNKNOWN = "schema_unknown"
    UNSUPPORTED_LAYOUT = "unsupported_layout"
    NOT_REGULAR_FILE = "not_regular_file"  # a FIFO, device, socket or directory where a file belongs: never opened
    FILE_TOO_LARGE = "file_too_large"  # bigger than any real file of its kind (artifacts.fileio.LIMITS): never read
    GATE_RESUME_REQUIRED = "gate_resume_required"  # a round the operator gate changed: resume only under the gate


class Problem(BaseModel):
    """One thing wrong with one file. ``path`` is absolute or relative to a case root
    depending on who built it; :meth:`relative_to` re-bases it for reports."""

    model_config = ConfigDict(frozen=True)

    code: ProblemCode
    path: str
    message: str

    def relative_to(self, base: "str | object") -> "Problem":
        try:
            rel = os.path.relpath(self.path, str(base))
        except ValueError:
            rel = self.path
        return self.model_copy(update={"path": rel})
