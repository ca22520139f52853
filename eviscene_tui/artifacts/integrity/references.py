"""Recorded ``{path, sha256}`` references: where the file is, and whether its bytes
still hash to what the run recorded.

Two kinds (the one path trust model of ``artifacts.paths``):

- files the run WROTE (episodes, snapshot files, media bindings, judge files) must live
  in the case: an absolute path is mapped into the case by its path relative to the
  recorded ``output_dir`` / round ``directory``; an unmapped one is ``path_outside_root``
  and a missing file ``missing_artifact``;
- bound INPUTS (source trace, candidate, gold, ...) are read wherever the resolver finds
  them; a missing one is reported once, with where it was looked for, and each one checked
  can be reported as an :class:`InputProvenance`.
"""

from __future__ import annotations

from eviscene_tui.artifacts.fileio import LIMITS, open_regular
from eviscene_tui.artifacts.integrity.files import CaseFiles
from eviscene_tui.artifacts.integrity.reading import parent, short
from eviscene_tui.artifacts.integrity.tree import CaseTree, Findings
from eviscene_tui.artifacts.jsonio import sha256_bytes
from eviscene_tui.artifacts.paths import InputProvenance, PathResolver, input_provenance, missing_input_message
from eviscene_tui.artifacts.problems import ProblemCode

Slice = tuple[int, int]


def slice_sha(path: str, offset: int, length: int) -> str | None:
    """sha256 of ``length`` bytes at ``offset`` (an indexed input), None when unreadable
    (or not a regular file, or a slice longer than a ledger holds)."""
    if length > LIMITS["ledger"]:
        return None
    try:
        with open_regular(path, limit=0) as fh:
            fh.seek(offset)
            return sha256_bytes(fh.read(length))
    except (OSError, ValueError, OverflowError):
        return None


class References:
    def __init__(
        self,
        tree: CaseTree,
        files: CaseFiles,
        findings: Findings,
        paths: PathResolver,
        provenance: list[InputProvenance] | None,
    ) -> None:
        self.tree = tree
        self.files = files
        self.findings = findings
        self.paths = paths
        self.provenance = provenance
        self._provenance_seen: set[tuple[str, str]] = set()
        self._sha_checked: set[tuple[str, str]] = set()
        self._missing: set[str] = set()

    def resolve(self, recorded: object, rel_base: str | None, *, cwd: bool = False) -> tuple[str, str | None]:
        """Map a path the run wrote into the case (``paths.PathResolver.written``).

        Returns (outcome, local path): ``ok`` (inside the case), ``outside`` (leaves
        the case through ``..`` or a symlink), ``unmapped`` (an absolute path not under
        any recorded base), ``invalid`` (not a path string).
        """
        if rel_base is None and not (isinstance(recorded, str) and recorded.startswith("/")) and not cwd:
            return ("invalid", None) if not isinstance(recorded, str) or not recorded else ("unmapped", None)
        found = self.paths.written(recorded, base=rel_base, cwd=cwd)
        return found.outcome, found.path

    def _sha(self, local: str, slice_: Slice | None) -> str | None:
        return slice_sha(local, *slice_) if slice_ is not None else self.files.file_sha(local)

    # ------------------------------------------------------------------ files the run wrote
    def written(self, recorded: object, expected_sha: object, *, rel_base: str | None, referrer: str, what: str) -> str | None:
        """Check one reference to a file the run wrote; returns the local path when found."""
        outcome, local = self.resolve(recorded, rel_base)
        if outcome != "ok" or local is None:
            self._not_in_case(outcome, recorded, local, referrer, what)
            return None
        if not self.files.readable(local):
            return None  # refused by the walk (a symlink out, a FIFO): reported once, never opened
        if not self.tree.is_file(local):
            self._absent(local, referrer, what)
            return None
        if isinstance(expected_sha, str) and expected_sha:
            self._verify_written(local, expected_sha, referrer, what)
        return local

    def _not_in_case(self, outcome: str, recorded: object, local: str | None, referrer: str, what: str) -> None:
        if outcome == "invalid":
            if recorded is not None:
                self.findings.add(ProblemCode.JSON_INVALID, referrer, f"{what}: path {recorded!r} is not a path string")
        elif outcome == "unmapped":
            if self.paths.knows_written_location:
                self.findings.add(
                    ProblemCode.PATH_OUTSIDE_ROOT,
                    referrer,
                    f"{what}: path {recorded} is outside the case root (recorded base: {self.paths.written_roots[-1].old})",
                )
        elif outcome == "outside":
            self.findings.add(
                ProblemCode.PATH_OUTSIDE_ROOT, referrer,
                f"{what}: path {recorded} resolves outside the case root ({self.tree.rel(local or '')})",
            )

    def _absent(self, local: str, referrer: str, what: str) -> None:
        if self.tree.is_dir(local):
            self.findings.add(
                ProblemCode.MISSING_ARTIFACT, local, f"{what}: expected a file referenced by {self.tree.rel(referrer)}, found a directory"
            )
        elif local not in self._missing:  # one report per missing file, first referrer named
            self._missing.add(local)
            self.findings.add(ProblemCode.MISSING_ARTIFACT, local, f"{what}: file referenced by {self.tree.rel(referrer)} is missing")

    def _verify_written(self, local: str, expected_sha: str, referrer: str, what: str) -> None:
        key = (local, expected_sha.lower())
        if key in self._sha_checked:
            return
        self._sha_checked.add(key)
        actual = self.files.file_sha(local)
        if actual is None:
            self.findings.add(ProblemCode.MISSING_ARTIFACT, local, f"{what}: cannot read the file")
        elif actual != expected_sha.lower():
            self.findings.add(
                ProblemCode.FILE_HASH_MISMATCH,
                local,
                f"{what}: {self.tree.rel(referrer)} binds sha256 {short(expected_sha)}, the file has {short(actual)}",
            )

    # ------------------------------------------------------------------ bound inputs
    def bound_input(
        self,
        recorded: object,
        expected_sha: object,
        *,
        referrer: str,
        what: str,
        slice_: Slice | None = None,
        key: str | None = None,
    ) -> str | None:
        """A bound input (``paths.PathResolver.bound_input``): read wherever it is found;
        the recorded sha256 is verified; a missing one is reported once, with where it
        was looked for. Returns the local path when found."""
        if not isinstance(recorded, str) or not recorded:
            return None
        found = self.paths.bound_input(recorded, bases=[parent(referrer)], want="file")
        sha = expected_sha.lower() if isinstance(expected_sha, str) and expected_sha else None
        local = found.path if found.ok else None
        if local is not None and not self.files.readable(local):
            return None  # an input inside the case the walk refused: reported once, never opened
        if local is None and any(c in self.tree.refused for c in found.looked_at):
            return None  # it is there but refused (a FIFO, a symlink out): reported once by the walk
        if found.outcome == "invalid":
            self.findings.add(ProblemCode.JSON_INVALID, referrer, f"{what}: path {recorded!r} is not a usable path")
            status = "missing"
        elif local is None:
            status = "missing"
            if recorded not in self._missing:
                self._missing.add(recorded)
                looked = found.looked_at[0] if found.looked_at else recorded
                self.findings.add(ProblemCode.MISSING_ARTIFACT, looked, missing_input_message(what, self.tree.rel(referrer), found))
        elif sha is not None:
            status = self._verify_input(local, sha, expected_sha, slice_, referrer, what)
        else:
            status = "unbound"
        if self.provenance is not None and key is not None and (key, recorded) not in self._provenance_seen:
            self._provenance_seen.add((key, recorded))
            self.provenance.append(
                input_provenance(key, self.tree.rel(referrer), recorded, found, resolver=self.paths, sha256=sha, sha_status=status)
            )
        return local

    def _verify_input(self, local: str, sha: str, recorded_sha: object, slice_: Slice | None, referrer: str, what: str) -> str:
        """The sha status of a found input (``verified``, ``mismatch``, ``unreadable``)."""
        ck = (local, sha + (f"@{slice_}" if slice_ else ""))
        actual = self._sha(local, slice_)
        if actual is None:
            status = "unreadable"
            self.findings.add(ProblemCode.MISSING_ARTIFACT, local, f"{what}: cannot read the file")
        elif actual != sha:
            status = "mismatch"
            if ck not in self._sha_checked:
                self.findings.add(
                    ProblemCode.FILE_HASH_MISMATCH,
                    local,
                    f"{what}: {self.tree.rel(referrer)} binds sha256 {short(recorded_sha)}, the file has {short(actual)}",
                )
        else:
            status = "verified"
        self._sha_checked.add(ck)
        return status
