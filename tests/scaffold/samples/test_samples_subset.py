"""The tests' ``generate_samples(cases=...)``: a few cases of the sample tree written alone
are the full tree's files for those cases, byte for byte, with their inputs beside them."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import generate_samples


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_subset_is_the_full_trees_files_for_those_cases(tmp_path: Path) -> None:
    full = _files(tmp_path / "full") if generate_samples(tmp_path / "full") else {}
    written = generate_samples(tmp_path / "part", cases=["hostile-strings", "multi-case"])
    part = _files(tmp_path / "part")
    assert written == len(part)

    def wanted(rel: str) -> bool:
        head, _, rest = rel.partition("/")
        if not rest:
            return True
        if head == "inputs":
            name = rest.split("/", 1)[0]
            return name == "hostile-strings" or name.startswith(("hostile-strings-", "multi-case-"))
        return head in ("hostile-strings", "multi-case")

    assert part == {rel: data for rel, data in full.items() if wanted(rel)}
    assert any(rel.startswith("inputs/multi-case-") for rel in part)  # a wrapper's inputs come along
    assert not any(rel.startswith("feedback-converged-3-rounds/") for rel in part)


def test_an_unknown_case_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="no such sample case"):
        generate_samples(tmp_path / "x", cases=["no-such-case"])
