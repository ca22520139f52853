"""What every concern checker of one case shares: the case, its walk, its file reader,
its reference checker, the path resolver and the problems found so far."""

from __future__ import annotations

import os

from eviscene_tui.artifacts.integrity.files import CaseFiles
from eviscene_tui.artifacts.integrity.references import References
from eviscene_tui.artifacts.integrity.tree import CaseTree, Findings
from eviscene_tui.artifacts.jsonio import Parsed
from eviscene_tui.artifacts.layout import CaseRef
from eviscene_tui.artifacts.paths import InputProvenance, PathMap, PathResolver


class CaseContext:
    def __init__(
        self,
        ref: CaseRef,
        cache: dict[str, bytes] | None = None,
        parsed: Parsed | None = None,
        *,
        path_map: PathMap | None = None,
        provenance: list[InputProvenance] | None = None,
    ) -> None:
        self.ref = ref
        self.root = os.path.normpath(os.path.abspath(ref.path))
        self.wrapper = os.path.normpath(os.path.abspath(ref.wrapper)) if ref.wrapper is not None else None
        self.findings = Findings()
        self.add = self.findings.add
        self.tree = CaseTree(self.root, self.wrapper, self.findings)
        self.files = CaseFiles(self.tree, self.findings, cache if cache is not None else {}, parsed)
        # the one path trust model (artifacts.paths): written paths stay in the case,
        # bound inputs are read wherever the rules find them
        self.paths = PathResolver(
            self.root, boundary=self.wrapper or self.root, path_map=path_map or PathMap(), lookup=self.tree.lookup,
        )
        self.refs = References(self.tree, self.files, self.findings, self.paths, provenance)

    def add_written_root(self, recorded_search_root: str | None, local: str) -> None:
        """Tell the resolver where the driver wrote ``local`` (and, for a wrapper case
        ``<out>/repairs/<key>``, where it wrote ``<out>``)."""
        if not recorded_search_root:
            return
        self.paths.add_written(recorded_search_root, local)
        if self.wrapper is None or not self.ref.key or local != self.root:
            return
        rec = recorded_search_root.rstrip("/")
        suffix = f"/repairs/{self.ref.key}"
        if rec.endswith(suffix):
            self.paths.add_written(rec[: -len(suffix)], self.wrapper)
