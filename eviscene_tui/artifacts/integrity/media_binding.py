"""An attempt's ``psd_media``: the images it binds are in the run's ``media/`` with the
recorded bytes, and the student and teacher prompts hold one image-pad run per image
(through ``artifacts.media``)."""

from __future__ import annotations

import os

from eviscene_tui.artifacts import media as media_mod
from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.reading import int_list

QWEN35_PAD = 248056
QWEN25_PAD = 151655
QWEN35_IM_START = 248045
QWEN25_IM_START = 151644


def pad_runs(ids: list[int], pad_id: int) -> int:
    """Number of maximal runs of ``pad_id`` in ``ids``."""
    runs = 0
    prev = False
    for tok in ids:
        cur = tok == pad_id
        if cur and not prev:
            runs += 1
        prev = cur
    return runs


def pad_id_for_ids(*id_lists: list[int] | None) -> int:
    """Qwen3.5 (248056) unless the prompt is framed by the Qwen2.5/3-VL im_start only."""
    seen35 = seen25 = False
    for ids in id_lists:
        if not ids:
            continue
        if QWEN35_IM_START in ids or QWEN35_PAD in ids:
            seen35 = True
        elif QWEN25_IM_START in ids:
            seen25 = True
    return QWEN25_PAD if seen25 and not seen35 else QWEN35_PAD


class MediaBinding:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx

    def attempt(self, row: dict[str, object], i: int, path: str, run: str) -> None:
        media_obj = row.get("psd_media")
        if media_obj is None:
            # psd_media is optional (§7.11; older runtimes did not write it): image-pad runs
            # without it are information (the token view says "media binding not recorded"),
            # not a media_mismatch
            return
        label = f"attempt row {i + 1}"
        student = int_list(row.get("student_prompt_ids"))
        teacher = int_list(row.get("teacher_prompt_ids"))
        parsed, problems = media_mod.parse_psd_media(media_obj, path=path)
        for p in problems:
            self.ctx.add(p.code, p.path, f"{label}: {p.message}")
        if parsed is None:
            return
        report = media_mod.verify_media(
            parsed, run, student_prompt_ids=student, teacher_prompt_ids=teacher,
            pad_id=pad_id_for_ids(student, teacher), record_path=path, read_dimensions=False,
        )
        for p in report.problems:
            if os.path.normpath(os.path.abspath(p.path)) in self.ctx.tree.refused:
                continue  # a media file the walk refused (a symlink out, a FIFO): one fault, one problem
            message = p.message if p.path != path else f"{label}: {p.message}"
            self.ctx.add(p.code, p.path, message)
        for img in report.images:
            if img.resolved_path:
                self.ctx.tree.handled.add(os.path.normpath(os.path.abspath(img.resolved_path)))
