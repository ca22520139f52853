"""Student vs teacher prompt ids, and teacher vs source completion alignment. Textual-free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class PromptDiff:
    """Teacher = student with ``student[prefix:len(student)-suffix]`` replaced by the inserted span.

    ``inserted`` is the teacher's span (where the hint went), ``removed`` the student's
    span it replaced (usually empty). Offsets are token offsets, end exclusive.
    """

    student_len: int
    teacher_len: int
    prefix: int
    suffix: int

    @property
    def inserted(self) -> tuple[int, int]:
        return self.prefix, self.teacher_len - self.suffix

    @property
    def removed(self) -> tuple[int, int]:
        return self.prefix, self.student_len - self.suffix

    @property
    def identical(self) -> bool:
        return self.student_len == self.teacher_len == self.prefix

    @property
    def pure_insertion(self) -> bool:
        a, b = self.removed
        return a == b and not self.identical


def prompt_diff(student: Sequence[int], teacher: Sequence[int]) -> PromptDiff:
    n, m = len(student), len(teacher)
    limit = min(n, m)
    p = 0
    # chunked comparison keeps this fast on long prompts
    step = 4096
    while p < limit:
        q = min(limit, p + step)
        if list(student[p:q]) == list(teacher[p:q]):
            p = q
            continue
        while p < q and student[p] == teacher[p]:
            p += 1
        break
    s = 0
    max_s = limit - p
    while s < max_s and student[n - 1 - s] == teacher[m - 1 - s]:
        s += 1
    return PromptDiff(student_len=n, teacher_len=m, prefix=p, suffix=s)


@dataclass(frozen=True)
class AlignOp:
    tag: str  # "equal" | "replace" | "delete" | "insert"
    a_start: int
    a_end: int
    b_start: int
    b_end: int


def align(a: Sequence[int], b: Sequence[int], *, max_cells: int = 25_000_000) -> tuple[list[AlignOp], str]:
    """Align ``a`` (source completion) with ``b`` (teacher completion).

    Uses difflib's matching-blocks alignment (longest-match based, close to an LCS
    on token ids). Beyond ``max_cells`` (len(a)*len(b)) it falls back to positional
    alignment. Returns (ops, method).
    """
    if len(a) * len(b) <= max_cells:
        sm = SequenceMatcher(None, list(a), list(b), autojunk=False)
        return [AlignOp(*op) for op in sm.get_opcodes()], "longest-match (difflib)"
    ops: list[AlignOp] = []
    n = min(len(a), len(b))
    i = 0
    while i < n:
        j = i
        same = a[i] == b[i]
        while j < n and (a[j] == b[j]) == same:
            j += 1
        ops.append(AlignOp("equal" if same else "replace", i, j, i, j))
        i = j
    if len(a) > n:
        ops.append(AlignOp("delete", n, len(a), n, n))
    if len(b) > n:
        ops.append(AlignOp("insert", n, n, n, len(b)))
    return ops, "positional"


def alignment_summary(ops: Sequence[AlignOp]) -> dict[str, int]:
    out = {"equal": 0, "replace": 0, "delete": 0, "insert": 0}
    for op in ops:
        out[op.tag] += max(op.a_end - op.a_start, op.b_end - op.b_start)
    return out
