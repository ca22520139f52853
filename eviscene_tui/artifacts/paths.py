"""The path trust model: where a path recorded in a run file is looked for, and whether
it may be read at all. Every loader (``case.py``, ``integrity.py``) resolves recorded
paths through :class:`PathResolver`; nothing else decides this.

Three kinds of recorded paths (psd-run-format §1-§2, §7):

1. **Bound inputs**: every ``{path, sha256}`` binding in ``run-inputs.json`` and in the
   search identity (``search-state.json`` ``inputs``), the wrapper's ``case-inputs/``,
   and the manifest ``trace``. These are the files the researcher passed on the command
   line (``--trace /data/…``); the driver never copies them, so they normally live
   OUTSIDE the run root. They are read wherever they are, read-only; their sha256 is
   verified where one is recorded (``file_hash_mismatch``), and a missing one is
   ``missing_artifact`` naming where it was looked for (:meth:`PathResolver.bound_input`).
2. **The source rollout**: the runtime archive named by the source trace's
   ``state.runtime_store.runtime_path`` and by a candidate's / site's
   ``runtime_store_path`` / ``source_runtime_store_path``. It belongs to the (bound)
   source trace and is read where it is (:meth:`PathResolver.source`).
3. **What the run wrote**: episodes, continuations (and their ``.json.gz``), ``media/``,
   round ``runtime/`` dirs, judge files, every path in ``rounds[].files`` and in attempt
   records. These must resolve INSIDE the case root (or the multi-case wrapper root);
   one that leaves it (``..``, an absolute path elsewhere, a symlink out) is
   ``path_outside_root`` and is never followed (:meth:`PathResolver.written`).

Nothing outside the root is ever written, locked or watched for writes: reading only.

Where a recorded path is looked for, in order (each rule has a name the app shows):

- ``moved tree`` (the tree itself): the tree was written somewhere else (another
  machine, an rsync copy). The location it was written at is inferred from what the
  driver recorded about itself (the run-inputs / search ``output_dir``, search-state
  ``rounds[].directory``, manifest ``rounds``): each recorded directory is paired with
  the local directory it names, and a recorded path under a recorded directory is looked
  for under the local one - and only there: that is a file the run wrote (even when it
  is bound as an input, like ``round-inputs/…``), so a copy that lost it never reads the
  original's at its recorded place, and no path map moves it;
- ``path map``: an explicit ``OLD=NEW`` prefix mapping (``--path-map``, or the config
  file's ``[paths] map``), for inputs copied somewhere else;
- ``as recorded``: the absolute path itself (same machine, tree not moved);
- ``moved tree`` (beside it): the common tail of a recorded/local pair above gives a
  prefix rebase for files that sat BESIDE the root: ``/data/exp/psd-fb-x`` written,
  ``/home/me/copy/psd-fb-x`` found -> every ``/data/exp/…`` is looked for under
  ``/home/me/copy/…``;
- ``driver working directory``: older runs record some paths (runtime archives, the
  manifest ``trace``) relative to the driver's working directory, usually an ancestor
  of the run root: relative paths are tried against the root and each of its ancestors
  (and, for the source rollout, against the source trace's folder and its ancestors);
- ``relative to its run directory``: a path recorded relative to the run directory
  that holds the file naming it (episode paths in round ledgers);
- ``wrapper case-inputs``: the multi-case wrapper's ``case-inputs/<key>/`` copy.

The rules apply identically before and after a move, so a moved copy gives the same
answers as the original. Nothing here raises: hostile values (NUL bytes, very long or
non-UTF-8 names, loops) give an ``invalid`` or ``missing`` outcome.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

RULE_PATH_MAP = "path map"
RULE_MOVED = "moved tree"
RULE_RECORDED = "as recorded"
RULE_CWD = "driver working directory"
RULE_RUN_DIR = "relative to its run directory"
RULE_NEAR_TRACE = "the source rollout's working directory"
RULE_CASE_INPUTS = "wrapper case-inputs"
RULE_NOT_FOUND = "not found"

OK = "ok"  # found (inputs, source rollout) / maps inside the root (written paths)
MISSING = "missing"  # an input or source path that exists nowhere the rules look
OUTSIDE = "outside"  # a written path that leaves the root: path_outside_root, not followed
UNMAPPED = "unmapped"  # a written absolute path under no known written location
INVALID = "invalid"  # not a usable path string

# human names of the run config's file arguments (§2.2)
INPUT_WHAT: dict[str, str] = {
    "trace": "source trace",
    "candidate": "candidate",
    "audit": "source audit",
    "gold": "gold",
    "public_context": "public context",
    "private_context": "private context",
    "image": "image",
    "train_cases": "train cases",
    "policy_serving_profile": "serving profile",
    "round_start_checkpoint_manifest": "checkpoint manifest",
    "semantic_verification": "semantic verification",
    "verification_bundle": "verification bundle",
    "source_access_policy": "source-access policy",
    "search_media": "search media",
}

MAX_PATH_CHARS = 4096


def _norm(path: str) -> str:
    """``os.path.normpath(os.path.abspath(path))``. An absolute path with no empty, ``.``
    or ``..`` component and no trailing separator is that already (checked in C; the
    resolver normalises every candidate of every recorded path)."""
    if path.startswith("/") and "//" not in path and "/." not in path and not path.endswith("/") and os.sep == "/":
        return path
    return os.path.abspath(path)  # abspath normalises: a second normpath is a no-op


def _usable(value: object) -> str | None:
    """The recorded value as a path string, or None when it cannot name a file."""
    if not isinstance(value, str) or not value or "\x00" in value or len(value) > MAX_PATH_CHARS:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: no file on disk can have this name
        return None
    return value


def _kind(path: str) -> str | None:
    """``file`` / ``dir`` / ``other`` (symlinks followed), None when absent or unstat-able."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "other"


def _under(path: str, prefix: str) -> str | None:
    """The rest of ``path`` below ``prefix`` ("" for the prefix itself), else None."""
    if prefix == "/":
        return path.lstrip("/") if path.startswith("/") else None
    if path == prefix:
        return ""
    if path.startswith(prefix + "/"):
        return path[len(prefix) + 1 :]
    return None


def _inside(path: str, roots: Sequence[str]) -> bool:
    for r in roots:
        if path == r or path.startswith(r.rstrip(os.sep) + os.sep):
            return True
    return False


def ancestors(path: str) -> list[str]:
    """``path`` and each of its parents, nearest first (``/`` last)."""
    out = [path]
    while True:
        parent = os.path.dirname(out[-1])
        if parent == out[-1]:
            return out
        out.append(parent)


# --------------------------------------------------------------------------- the explicit map
@dataclass(frozen=True, slots=True)
class PathMap:
    """Explicit ``OLD=NEW`` prefix mappings, in the order given (first match wins)."""

    entries: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, items: Iterable[str]) -> "PathMap":
        """From ``OLD=NEW`` strings (the ``--path-map`` values); ValueError on a bad one."""
        entries: list[tuple[str, str]] = []
        for item in items:
            old, sep, new = item.partition("=")
            if not sep or not old.strip() or not new.strip():
                raise ValueError(f"--path-map expects OLD=NEW, got {item!r}")
            entries.append((old.strip(), new.strip()))
        return cls.from_pairs(entries)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str]) -> "PathMap":
        """From a ``{OLD: NEW}`` table (the config file's ``[paths] map``)."""
        return cls.from_pairs((str(k), str(v)) for k, v in mapping.items())

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> "PathMap":
        out = []
        for old, new in pairs:
            old_n = posixpath.normpath(old) if old.startswith("/") else old.rstrip("/")
            out.append((old_n, _norm(os.path.expanduser(new))))
        return cls(tuple(out))

    def merged(self, other: "PathMap | None") -> "PathMap":
        """These entries first, then ``other``'s (command line before config file)."""
        if other is None or not other.entries:
            return self
        return PathMap(self.entries + tuple(e for e in other.entries if e not in self.entries))

    def __bool__(self) -> bool:
        return bool(self.entries)


# --------------------------------------------------------------------------- results
@dataclass(frozen=True, slots=True)
class Found:
    """Where a recorded path was looked for and what was found.

    ``path``: the local absolute path (for a written path also when it does not exist;
    callers report missing files). ``rule``/``detail``: which rule produced it
    (``moved tree``, ``/data/exp -> /home/me/copy``). ``looked_at``: every location
    tried, in order (for a clear "not found" message)."""

    recorded: str
    outcome: str
    path: str | None = None
    rule: str = RULE_NOT_FOUND
    detail: str = ""
    looked_at: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome == OK

    def how(self) -> str:
        """``moved tree (/data/exp → /home/me/copy)`` or just the rule name."""
        return f"{self.rule} ({self.detail})" if self.detail else self.rule


@dataclass(frozen=True, slots=True)
class InputProvenance:
    """One input of the case and where it came from, for the case screen and reports.

    ``sha_status``: ``verified`` (the file hashes to the bound sha256), ``mismatch``,
    ``unverified`` (bound but not hashed yet), ``unbound`` (no sha256 recorded),
    ``missing`` (the file was not found), ``unreadable``."""

    what: str
    key: str
    referrer: str
    recorded: str | None
    found: str | None
    rule: str
    detail: str = ""
    inside_root: bool | None = None
    sha256: str | None = None
    sha_status: str = "unbound"
    looked_at: tuple[str, ...] = ()

    def sha_text(self) -> str:
        return {
            "verified": "sha256 bound \u2713",
            "mismatch": "sha256 MISMATCH \u2717",
            "unverified": "sha256 bound (not verified yet)",
            "unbound": "no sha256 recorded",
            "missing": "sha256 bound, file missing" if self.sha256 else "file missing",
            "unreadable": "cannot be read",
        }.get(self.sha_status, self.sha_status)

    def short(self) -> str:
        """A few words for a status bar: ``trace: outside root, moved tree, sha256 ✓``
        (the full line is :meth:`line`)."""
        what = "trace" if self.key == "trace" else self.what
        if self.found is None:
            return f"{what}: NOT FOUND (see Integrity)"
        sha = {"verified": "sha256 \u2713", "mismatch": "sha256 MISMATCH", "unverified": "sha256 bound",
               "unbound": "no sha256", "missing": "missing", "unreadable": "unreadable"}.get(self.sha_status, self.sha_status)
        where = "inside root" if self.inside_root else "outside root"
        return f"{what}: {where}, {self.rule}, {sha}"

    def line(self) -> str:
        """``source trace: /data/…/trace.json · outside the run root · found by moved tree (…) · sha256 bound ✓``"""
        if self.found is None:
            parts = [f"{self.what}: NOT FOUND", f"recorded at {self.recorded or '?'} (in {self.referrer})"]
            if self.looked_at:
                parts.append("looked for at " + ", ".join(self.looked_at[:3]))
        else:
            parts = [f"{self.what}: {self.found}"]
            parts.append("inside the run root" if self.inside_root else "outside the run root")
            parts.append("found " + (f"by {self.rule} ({self.detail})" if self.detail else f"{self.rule}"))
        parts.append(self.sha_text())
        return " \u00b7 ".join(parts)


@dataclass(frozen=True, slots=True)
class Rebase:
    old: str  # recorded (written) prefix, posix-normalised absolute
    new: str  # local prefix, absolute


# --------------------------------------------------------------------------- the resolver
@dataclass
class PathResolver:
    """Resolves recorded paths of one case by the rules of this module.

    ``root``: the case root as found here; ``boundary``: the folder written paths must
    stay inside (the wrapper root for ``repairs/<key>`` cases, else the root).
    ``lookup``: optional fast existence test (the integrity checker passes its
    directory walk); it returns ``file``/``dir``/``absent``, or None when it does not
    know the path. Used only together with ``no_symlinks``."""

    root: str
    boundary: str | None = None
    path_map: PathMap = field(default_factory=PathMap)
    lookup: Callable[[str], str | None] | None = None
    no_symlinks: bool = False  # set by a caller whose walk saw no symlink under the boundary
    real_boundary: str | None = None  # ``os.path.realpath(boundary)`` when the caller has it already

    def __post_init__(self) -> None:
        self.root = _norm(self.root)
        self.boundary = _norm(self.boundary) if self.boundary else self.root
        self._allowed_lex = [self.boundary]
        self._real: list[str] | None = [self.real_boundary] if self.real_boundary else None
        self._written: list[Rebase] = []  # recorded directory -> the local directory it names
        self._prefixes: list[Rebase] = []  # derived prefix rebases (files beside the root)
        self._cwd = ancestors(self.root)

    # ------------------------------------------------------------------ moved trees
    def add_written(self, recorded: object, local: str | os.PathLike[str]) -> bool:
        """Record that the driver's absolute ``recorded`` directory is ``local`` here.

        Also derives the prefix rebase from the pair's common tail (or, when the tail is
        empty because the root itself was renamed, from their parents). Returns False
        for a value that is not an absolute path."""
        text = _usable(recorded)
        if text is None or not text.startswith("/"):
            return False
        rec = posixpath.normpath(text)
        loc = _norm(os.fspath(local))
        if rec == "/":
            return False
        pair = Rebase(rec, loc)
        if pair not in self._written:
            self._written.append(pair)
            self._written.sort(key=lambda r: -len(r.old))
        rec_parts = rec.strip("/").split("/")
        loc_parts = loc.strip(os.sep).split(os.sep)
        tail = 0
        while tail < min(len(rec_parts), len(loc_parts)) and rec_parts[-1 - tail] == loc_parts[-1 - tail]:
            tail += 1
        depth = tail if tail else 1
        if depth < len(rec_parts) and depth <= len(loc_parts):
            old = "/" + "/".join(rec_parts[: len(rec_parts) - depth])
            new = os.sep + os.sep.join(loc_parts[: len(loc_parts) - depth])
            if old != "/" and old != new:
                prefix = Rebase(old, _norm(new))
                if prefix not in self._prefixes:
                    self._prefixes.append(prefix)
                    self._prefixes.sort(key=lambda r: -len(r.old))
        return True

    @property
    def written_roots(self) -> list[Rebase]:
        return list(self._written)

    @property
    def rebases(self) -> list[Rebase]:
        return list(self._prefixes)

    @property
    def knows_written_location(self) -> bool:
        """True once the location the tree was written at is known."""
        return bool(self._written)

    def moved(self) -> bool:
        """True when the tree was written somewhere else than where it is now."""
        return any(r.old != r.new for r in self._written)

    # ------------------------------------------------------------------ helpers
    def _exists(self, path: str, want: str | None = None) -> bool:
        kind: str | None = None
        known = False
        if self.lookup is not None and self.no_symlinks:
            got = self.lookup(path)  # "file" / "dir" / "absent", None when it does not know
            if got is not None:
                kind, known = (None if got == "absent" else got), True
        if not known:
            kind = _kind(path)
        if want is None:
            return kind is not None
        return kind == want

    def inside(self, path: str) -> bool:
        """Lexically and physically (symlinks followed) inside the boundary."""
        if not _inside(path, self._allowed_lex):
            return False
        if self.no_symlinks:
            return True
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            return True
        return _inside(real, self._allowed_real())

    def _allowed_real(self) -> list[str]:
        """The boundary with its symlinks resolved (at first need: a tree without symlinks
        never asks)."""
        if self._real is None:
            try:
                self._real = [os.path.realpath(self.boundary or self.root)]
            except (OSError, ValueError):
                self._real = [self.boundary or self.root]
        return self._real

    def _in_tree(self, rec: str) -> tuple[str, str, str] | None:
        """(local path, rule, detail) of an absolute recorded path under a directory the
        driver wrote this tree at (its ``output_dir``, a round ``directory``), else None."""
        for r in self._written:
            rest = _under(rec, r.old)
            if rest is not None:
                detail = "" if r.old == r.new else f"{r.old} \u2192 {r.new}"
                return (_norm(os.path.join(r.new, rest)) if rest else r.new, RULE_MOVED if detail else RULE_RECORDED, detail)
        return None

    def _mapped(self, rec: str) -> list[tuple[str, str, str]]:
        """(candidate, rule, detail) for an absolute recorded path. A path under where the
        tree was written names a file the run wrote (``round-inputs/…``): it is looked for
        in the opened tree only, never at its recorded place (a moved copy that lost it
        must not read the original's). Any other path: path map, as recorded, moved tree
        (prefix rebases)."""
        in_tree = self._in_tree(rec)
        if in_tree is not None:
            return [in_tree]
        out: list[tuple[str, str, str]] = []
        for old, new in self.path_map.entries:
            rest = _under(rec, old)
            if rest is not None:
                out.append((_norm(os.path.join(new, rest)) if rest else new, RULE_PATH_MAP, f"{old} \u2192 {new}"))
        out.append((_norm(rec), RULE_RECORDED, ""))
        for r in self._prefixes:
            rest = _under(rec, r.old)
            if rest is not None:
                out.append((_norm(os.path.join(r.new, rest)) if rest else r.new, RULE_MOVED, f"{r.old} \u2192 {r.new}"))
        seen: set[str] = set()
        unique = []
        for cand in out:
            if cand[0] not in seen:
                seen.add(cand[0])
                unique.append(cand)
        return unique

    # ------------------------------------------------------------------ rule 3: written
    def written(self, recorded: object, *, base: str | os.PathLike[str] | None = None, cwd: bool = False) -> Found:
        """A path the run wrote: it must resolve inside the boundary.

        Outcome ``ok`` with the local path (which may not exist: the caller reports a
        missing file), ``outside`` (leaves the boundary: never follow it), ``unmapped``
        (an absolute path under no known written location), ``invalid``.
        ``base``: the directory a relative path is relative to; ``cwd``: also try the
        root's ancestors (paths relative to the driver's working directory)."""
        text = _usable(recorded)
        if text is None:
            return Found(str(recorded)[:200] if isinstance(recorded, str) else repr(recorded)[:200], INVALID)
        if text.startswith("/"):
            rec = posixpath.normpath(text)
            # where the tree was written comes first: a broad path map (OLD covering the
            # root itself, meant for the inputs beside it) must not move the run's own files
            in_tree = self._in_tree(rec)
            if in_tree is not None:
                return self._classify(text, *in_tree)
            for old, new in self.path_map.entries:
                rest = _under(rec, old)
                if rest is not None:
                    return self._classify(text, _norm(os.path.join(new, rest)), RULE_PATH_MAP, f"{old} \u2192 {new}")
            local = _norm(rec)
            if _inside(local, self._allowed_lex):  # the same machine: a path naming the case itself
                return self._classify(text, local, RULE_RECORDED, "")
            return Found(text, UNMAPPED, local, RULE_NOT_FOUND)
        tries: list[tuple[str, str, str]] = []
        if base is not None:
            b = _norm(os.fspath(base))
            tries.append((_norm(os.path.join(b, text)), RULE_RUN_DIR, b))
        if cwd or base is None:
            tries.extend((_norm(os.path.join(a, text)), RULE_CWD, a) for a in self._cwd)
        first: Found | None = None
        for cand, rule, detail in tries:
            got = self._classify(text, cand, rule, detail)
            if first is None:
                first = got
            if got.ok and self._exists(cand):
                return got
        assert first is not None
        if first.outcome == OUTSIDE or not any(self.inside(c) for c, _, _ in tries):
            return Found(text, OUTSIDE, first.path, first.rule, first.detail, tuple(c for c, _, _ in tries))
        if not first.ok:  # the natural base leaves the root, an ancestor does not: report the inside one
            for cand, rule, detail in tries:
                if self.inside(cand):
                    return Found(text, OK, cand, rule, detail, tuple(c for c, _, _ in tries))
        return first

    def _classify(self, recorded: str, cand: str, rule: str, detail: str) -> Found:
        if not self.inside(cand):
            return Found(recorded, OUTSIDE, cand, rule, detail, (cand,))
        return Found(recorded, OK, cand, rule, detail, (cand,))

    # ------------------------------------------------------------------ rule 1: bound inputs
    def bound_input(self, recorded: object, *, bases: Sequence[str | os.PathLike[str]] = (), want: str | None = None) -> Found:
        """A bound input (or the manifest ``trace``): found wherever the rules find it.

        ``bases``: extra directories a relative path may be relative to (the folder of
        the file that recorded it). ``want``: ``file`` or ``dir`` (any kind when None)."""
        text = _usable(recorded)
        if text is None:
            return Found(str(recorded)[:200] if isinstance(recorded, str) else repr(recorded)[:200], INVALID)
        if text.startswith("/"):
            tries = self._mapped(posixpath.normpath(text))
        else:
            tries = []
            for b in bases:
                bn = _norm(os.fspath(b))
                tries.append((_norm(os.path.join(bn, text)), RULE_RUN_DIR, bn))
            tries.extend((_norm(os.path.join(a, text)), RULE_CWD, a) for a in self._cwd)
        return self._first_existing(text, tries, want)

    # ------------------------------------------------------------------ rule 2: the source rollout
    def source(self, recorded: object, *, near: Sequence[str | os.PathLike[str]] = (), want: str | None = "dir") -> Found:
        """The source rollout's runtime archive: read where it is. A relative path is
        tried beside the source trace (``near``) and its ancestors (the rollout's working
        directory), then against the root and its ancestors (the driver's)."""
        text = _usable(recorded)
        if text is None:
            return Found(str(recorded)[:200] if isinstance(recorded, str) else repr(recorded)[:200], INVALID)
        if text.startswith("/"):
            rec = posixpath.normpath(text)
            tries = self._mapped(rec)
            if self._in_tree(rec) is None:
                tries.extend(self._near_by_tail(rec, near))
        else:
            tries = []
            for n in near:
                for a in ancestors(_norm(os.fspath(n))):
                    tries.append((_norm(os.path.join(a, text)), RULE_NEAR_TRACE, a))
            tries.extend((_norm(os.path.join(a, text)), RULE_CWD, a) for a in self._cwd)
        return self._first_existing(text, tries, want)

    @staticmethod
    def _near_by_tail(rec: str, near: Sequence[str | os.PathLike[str]]) -> list[tuple[str, str, str]]:
        """An absolute store path whose rollout moved along with its trace (the trace
        found elsewhere than the store names, e.g. inputs copied with their runtime/ dir):
        the longest tail of it (at least ``<case>/<attempt>``) found under the trace's
        folder or one of its ancestors."""
        parts = rec.strip("/").split("/")
        bases = [a for n in near for a in ancestors(_norm(os.fspath(n)))]
        out: list[tuple[str, str, str]] = []
        for k in range(len(parts) - 1, 1, -1):
            tail = "/".join(parts[len(parts) - k:])
            out.extend((_norm(os.path.join(a, tail)), RULE_NEAR_TRACE, a) for a in bases)
        return out

    def _first_existing(self, text: str, tries: list[tuple[str, str, str]], want: str | None) -> Found:
        seen: list[str] = []
        for cand, rule, detail in tries:
            if cand in seen:
                continue
            seen.append(cand)
            if self._exists(cand, want):
                return Found(text, OK, cand, rule, detail, tuple(seen))
        # the most telling place it was looked for: the rebased one when the tree moved
        primary = next((c for c, rule, _ in tries if rule in (RULE_PATH_MAP, RULE_MOVED)), seen[0] if seen else None)
        ordered = ([primary] if primary else []) + [c for c in seen if c != primary]
        return Found(text, MISSING, None, RULE_NOT_FOUND, "", tuple(ordered))


def run_dirs_from_media(image_paths: object) -> list[str]:
    """The run directories a ``psd_media.image_paths`` list names (``<run>/media/<sha>.image``,
    absolute, §2.12): where a run whose ``output_dir`` was recorded relative was written."""
    out: list[str] = []
    for p in image_paths if isinstance(image_paths, list) else []:
        text = _usable(p)
        if text is None or not text.startswith("/"):
            continue
        parent = posixpath.dirname(posixpath.normpath(text))
        if posixpath.basename(parent) == "media" and posixpath.dirname(parent) not in ("/", ""):
            run = posixpath.dirname(parent)
            if run not in out:
                out.append(run)
    return out


def input_provenance(
    key: str,
    referrer: str,
    recorded: str | None,
    found: Found | None,
    *,
    resolver: PathResolver,
    sha256: str | None = None,
    sha_status: str | None = None,
    what: str | None = None,
) -> InputProvenance:
    """The provenance row of one input from its resolution."""
    ok = found is not None and found.ok and found.path is not None
    status = sha_status or ("missing" if not ok else ("unverified" if sha256 else "unbound"))
    return InputProvenance(
        what=what or INPUT_WHAT.get(key, key.replace("_", " ")),
        key=key,
        referrer=referrer,
        recorded=recorded,
        found=found.path if ok and found is not None else None,
        rule=found.rule if found is not None else RULE_NOT_FOUND,
        detail=found.detail if found is not None else "",
        inside_root=resolver.inside(found.path) if ok and found is not None and found.path else None,
        sha256=sha256,
        sha_status=status,
        looked_at=found.looked_at if found is not None else (),
    )


def with_sha_status(rows: Sequence[InputProvenance], checked: Sequence[InputProvenance]) -> list[InputProvenance]:
    """``rows`` with the sha status the integrity check found for the same input (same
    key and recorded path); rows it did not check keep theirs."""
    by_key = {(c.key, c.recorded): c.sha_status for c in checked}
    out = []
    for row in rows:
        status = by_key.get((row.key, row.recorded))
        out.append(replace(row, sha_status=status) if status is not None and row.found is not None else row)
    return out


def missing_input_message(what: str, referrer: str, found: Found) -> str:
    """One clear message for an input that could not be found."""
    where = ", ".join(found.looked_at[:4]) or "nowhere"
    more = f" (+{len(found.looked_at) - 4} more)" if len(found.looked_at) > 4 else ""
    return (
        f"{what} not found: {referrer} records it at {found.recorded}; looked for at {where}{more}. "
        "Copy the run's inputs along with the tree, or map their location with --path-map OLD=NEW"
    )


__all__ = [
    "INPUT_WHAT",
    "Found",
    "InputProvenance",
    "PathMap",
    "PathResolver",
    "Rebase",
    "ancestors",
    "input_provenance",
    "missing_input_message",
    "run_dirs_from_media",
    "with_sha_status",
]
