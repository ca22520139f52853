"""The problems of one case check, and the one walk of the case every check consults.

Every path is an absolute, normalised ``str``; ``CaseTree.files`` / ``dir_files`` come from
one walk, so existence checks inside the case cost no system call.
"""

from __future__ import annotations

import os

from eviscene_tui.artifacts.fileio import not_regular
from eviscene_tui.artifacts.integrity.reading import join
from eviscene_tui.artifacts.problems import Problem, ProblemCode


class Findings:
    """The problems found so far, in the order found; a repeat (same code, path and
    message) is dropped."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._seen: set[tuple[str, str, str]] = set()

    def add(self, code: ProblemCode, path: str, message: str) -> None:
        key = (str(code), str(path), message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.problems.append(Problem(code=code, path=str(path), message=message))

    def extend(self, problems: list[Problem]) -> None:
        for p in problems:
            self.add(p.code, p.path, p.message)


def inside(path: str, roots: list[str]) -> bool:
    """``path`` is one of ``roots`` or below one."""
    for r in roots:
        if path == r or path.startswith(r.rstrip(os.sep) + os.sep):
            return True
    return False


class CaseTree:
    """The files and folders of the case (one walk), what a check has covered
    (``handled``: the generic pass skips those), and case-relative names for messages."""

    def __init__(self, root: str, wrapper: str | None, findings: Findings) -> None:
        self.root = root
        self._below = root + os.sep  # the prefix of every path inside the case
        self.wrapper = wrapper
        self.findings = findings
        self._allowed_real: list[str] | None = None
        self.files: list[str] = []  # every regular file found by the walk
        self.fileset: set[str] = set()
        self.dir_files: dict[str, list[str]] = {}
        self.dir_dirs: dict[str, list[str]] = {}
        self.has_symlinks = False
        self.handled: set[str] = set()
        # paths that are never opened: symlinks leading out of the case, FIFOs, devices,
        # sockets (each reported once, by the walk)
        self.refused: set[str] = set()

    @property
    def allowed_real(self) -> list[str]:
        """The case root and its wrapper, symlinks resolved: what a symlink may lead into.
        Resolved at first need (a case without symlinks and wrapper never asks)."""
        if self._allowed_real is None:
            real: list[str] = []
            for a in [self.root] + ([self.wrapper] if self.wrapper is not None else []):
                try:
                    real.append(os.path.realpath(a))
                except OSError:
                    real.append(a)
            self._allowed_real = real
        return self._allowed_real

    def rel(self, path: str) -> str:
        """Case-relative text for messages."""
        try:
            return os.path.relpath(path, self.root)
        except ValueError:
            return path

    def in_case(self, path: str) -> bool:
        return path.startswith(self._below) or path == self.root

    def is_file(self, path: str) -> bool:
        """A regular file (or a symlink to one, which the walk reported separately)."""
        if path in self.fileset:
            return True  # the walk saw a regular file there (symlinks are never in it)
        if self.in_case(path) and not self.has_symlinks:
            return path in self.fileset
        return os.path.isfile(path)

    def is_dir(self, path: str) -> bool:
        return path in self.dir_files or os.path.isdir(path)

    def exists(self, path: str) -> bool:
        if path in self.fileset:
            return True
        if self.in_case(path) and not self.has_symlinks:
            return path in self.fileset or path in self.dir_files or path in self.refused
        return os.path.lexists(path)

    def may_read(self, path: str) -> bool:
        """False for a path that must never be opened: one the walk refused (a symlink out
        of the case, a FIFO, a device, a socket), or one inside the case or its wrapper
        whose symlinks lead out of them. Paths elsewhere (bound inputs) are for the
        resolver and ``fileio`` to judge."""
        if path in self.refused:
            return False
        if not self.has_symlinks and path in self.fileset:
            return True  # a regular file the walk found, no symlink anywhere in the case
        walked = self.in_case(path)
        if walked and not self.has_symlinks:
            return True
        if not walked and not (self.wrapper is not None and inside(path, [self.wrapper])):
            return True
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            real = ""
        if real and inside(real, self.allowed_real):
            return True
        if not walked:  # the wrapper's own files are not walked: the refusal is said here, once
            self.refused.add(path)
            self.findings.add(ProblemCode.PATH_OUTSIDE_ROOT, path, "symlink points outside the case root; not read")
        return False

    def in_boundary(self, path: str) -> bool:
        """Lexically inside the case root or its wrapper root."""
        return self.in_case(path) or (self.wrapper is not None and inside(path, [self.wrapper]))

    def lookup(self, path: str) -> str | None:
        """The walk's answer for a path inside the case (None outside it: stat it)."""
        if not self.in_case(path):
            return None
        if path in self.fileset:
            return "file"
        if path in self.dir_files:
            return "dir"
        return "absent"

    def list_files(self, d: str) -> list[str]:
        if d in self.dir_files:
            return [join(d, n) for n in self.dir_files[d]]
        if self.in_case(d):
            return []
        try:
            with os.scandir(d) as it:
                return sorted(join(d, e.name) for e in it if e.is_file(follow_symlinks=False))
        except OSError:
            return []

    def list_dirs(self, d: str) -> list[str]:
        return [join(d, n) for n in self.dir_dirs.get(d, [])]

    # ------------------------------------------------------------------ the walk
    def walk(self) -> None:
        """One ``scandir`` per directory; each entry sorted by its directory-entry type (no
        ``stat``): a symlink (checked), a folder (walked), a leftover ``*.tmp`` (reported),
        a regular file (kept), anything else (refused, its ``lstat`` names what it is)."""
        stack = [self.root]
        files_all = self.files
        fileset = self.fileset
        while stack:
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError as exc:
                what = "the case directory" if d == self.root else "directory"
                self.findings.add(ProblemCode.MISSING_ARTIFACT, d, f"cannot read {what}: {exc.strerror or exc}")
                continue
            files: list[str] = []
            dirs: list[str] = []
            for e in entries:
                p = e.path  # join(d, e.name), made by scandir
                name = e.name
                try:  # the entry's own type (a symlink is neither a file nor a folder here)
                    if not e.is_file(follow_symlinks=False):
                        self._not_a_file(e, stack, dirs)
                        continue
                except OSError:
                    continue
                if name.endswith(".tmp"):
                    self._leftover_tmp(p, name)
                    continue
                files.append(name)
                files_all.append(p)
                fileset.add(p)
            files.sort()
            dirs.sort()
            self.dir_files[d] = files
            self.dir_dirs[d] = dirs

    def _not_a_file(self, e: os.DirEntry[str], stack: list[str], dirs: list[str]) -> None:
        """A folder (walked), a symlink (checked) or anything else (refused). Raises OSError."""
        if e.is_dir(follow_symlinks=False):
            stack.append(e.path)
            dirs.append(e.name)
        elif e.is_symlink():
            self.has_symlinks = True
            self._check_symlink(e.path)
        else:
            self._not_regular(e.path, e.stat(follow_symlinks=False).st_mode)

    def _not_regular(self, p: str, mode: int) -> None:
        self.refused.add(p)
        self.handled.add(p)
        self.findings.add(ProblemCode.NOT_REGULAR_FILE, p, not_regular(p, mode).message)

    def _leftover_tmp(self, p: str, name: str) -> None:
        self.findings.add(
            ProblemCode.LEFTOVER_TMP,
            p,
            f"leftover temporary file from an interrupted write (the final file would be {name[:-4]})",
        )
        self.handled.add(p)

    def _check_symlink(self, p: str) -> None:
        try:
            target = os.path.realpath(p)
        except OSError:
            target = ""
        self.handled.add(p)
        if not target or not inside(target, self.allowed_real):
            try:
                link = os.readlink(p)
            except OSError:
                link = "?"
            self.refused.add(p)
            self.findings.add(ProblemCode.PATH_OUTSIDE_ROOT, p, f"symlink points outside the case root (-> {link}); not read")
        elif not os.path.exists(p):
            self.findings.add(ProblemCode.MISSING_ARTIFACT, p, "dangling symlink")
