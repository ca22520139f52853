"""Manifests, the search state and its rounds: where the driver wrote the case, the round
directories the manifest lists, the snapshot files and episodes ``search-state.json``
binds, the round requests and the round inputs."""

from __future__ import annotations

import posixpath
from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.files import Expected
from eviscene_tui.artifacts.integrity.reading import REQUEST_RE, as_dict, as_list, base, join, short
from eviscene_tui.artifacts.feedback import expected_feedback, first_difference
from eviscene_tui.artifacts.jsonio import canonical_sha256
from eviscene_tui.artifacts.layout import SEARCH_SCHEMA
from eviscene_tui.artifacts.paths import run_dirs_from_media
from eviscene_tui.artifacts.problems import ProblemCode
from eviscene_tui.artifacts.summary import ROUND_DIR_RE


def _recorded_root_from_rounds(dirs: list[object]) -> str | None:
    """``<out>`` from the first absolute ``<out>/rounds/round-NN`` directory listed."""
    for d in dirs:
        if isinstance(d, str) and d.startswith("/"):
            parent = posixpath.dirname(d.rstrip("/"))
            if posixpath.basename(parent) == "rounds":
                return posixpath.dirname(parent)
    return None


class Rounds:
    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx

    def manifest(self, path: str, label: str, schema: Expected, *, required: str) -> object:
        """A ``manifest.json`` (search or run): parsed, its schema checked."""
        manifest = self.ctx.files.json_file(path, required=required)
        self.ctx.files.schema(manifest, path, label, schema)
        return manifest

    # ------------------------------------------------------------------ search root
    def search_state(self, state_path: str) -> tuple[dict[str, object], dict[str, object]]:
        """``search-state.json``'s (identity, payload); its envelope and identity version checked."""
        state = self.ctx.files.bound_file(state_path, required="search-state.json")
        identity = as_dict(state.identity) if state is not None else {}
        payload = as_dict(state.payload) if state is not None else {}
        if identity and "version" in identity and identity.get("version") != SEARCH_SCHEMA:
            self.ctx.add(
                ProblemCode.SCHEMA_UNKNOWN,
                state_path,
                f"search-state identity version {identity.get('version')!r} is not known (expected {SEARCH_SCHEMA})",
            )
        return identity, payload

    def note_search_written(self, inputs: dict[str, object], manifest: object, payload: dict[str, object]) -> None:
        """Where the driver wrote this search: its ``output_dir`` (else the parent of its
        round directories), and each round's recorded ``directory``."""
        root = self.ctx.root
        out = inputs.get("output_dir")
        rec_root = out if isinstance(out, str) else None
        if rec_root is None:
            rows = [r.get("directory") for r in as_list(payload.get("rounds")) if isinstance(r, dict)]
            rec_root = _recorded_root_from_rounds(as_list(as_dict(manifest).get("rounds")) + rows)
        self.ctx.add_written_root(rec_root, root)
        for row in as_list(payload.get("rounds")):
            directory = as_dict(row).get("directory")
            if isinstance(directory, str) and ROUND_DIR_RE.match(posixpath.basename(directory.rstrip("/"))):
                self.ctx.paths.add_written(directory, join(root, "rounds", posixpath.basename(directory.rstrip("/"))))

    def listed_round_dirs(self, manifest: object) -> None:
        """The round directories the search manifest lists exist, inside the case."""
        root = self.ctx.root
        for d in as_list(as_dict(manifest).get("rounds")):
            if not isinstance(d, str):
                continue
            outcome, local = self.ctx.refs.resolve(d, root)
            if outcome == "ok" and local is not None and not self.ctx.tree.is_dir(local):
                self.ctx.add(ProblemCode.MISSING_ARTIFACT, local, "round directory listed in the search manifest is missing")
            elif outcome == "outside":
                self.ctx.add(ProblemCode.PATH_OUTSIDE_ROOT, join(root, "manifest.json"), f"round directory {d} resolves outside the case root")

    def snapshots(self, payload: dict[str, object], state_path: str) -> None:
        """Each round row's ``files`` map and its records' teacher episodes."""
        refs = self.ctx.refs
        for index, row in enumerate(as_list(payload.get("rounds"))):
            if not isinstance(row, dict):
                continue
            for fpath, sha in sorted(as_dict(row.get("files")).items()):
                refs.written(fpath, sha, rel_base=None, referrer=state_path, what=f"search-state round {index} snapshot file")
            for rec in as_list(row.get("records")):
                cont = as_dict(as_dict(rec).get("continuation"))
                if cont.get("hinted_teacher_episode_trace") is not None:
                    refs.written(
                        cont.get("hinted_teacher_episode_trace"), cont.get("hinted_teacher_episode_trace_sha256"),
                        rel_base=None, referrer=state_path, what=f"search-state round {index} teacher episode",
                    )

    def requests(self, identity: dict[str, object], payload: dict[str, object]) -> None:
        """``requests/round-NN.json``: each bound to this search's identity and to its
        round, holding the feedback the search history gives that round (§4.1; the driver
        compares them on resume, §4.4), and none missing for a round that ran."""
        root = self.ctx.root
        search_sha = canonical_sha256(identity, parsed=True) if identity else None  # as orjson parsed it
        rows = [r for r in as_list(payload.get("rounds")) if isinstance(r, dict)]
        seen: set[int] = set()
        for path, bound in self.ctx.files.bound_files(join(root, "requests"), REQUEST_RE):
            m = REQUEST_RE.match(base(path))
            index = int(m.group(1)) if m else -1
            seen.add(index)
            rid = as_dict(bound.identity)
            if search_sha and isinstance(rid.get("search"), str) and rid.get("search") != search_sha:
                self.ctx.add(
                    ProblemCode.BOUND_HASH_MISMATCH,
                    path,
                    f"request identity.search {short(rid.get('search'))} differs from the search-state identity ({short(search_sha)})",
                )
            if "round" in rid and rid.get("round") != index:
                self.ctx.add(ProblemCode.BOUND_HASH_MISMATCH, path,
                             f"request identity.round {str(rid.get('round'))[:20]!r} is not this file's round {index}")
            if rows and index <= len(rows) and not bound.problems:
                self._feedback(path, index, bound.payload, rows)
        for index in self._requests_due(rows, payload.get("status")):
            path = join(root, "requests", f"round-{index:02d}.json")
            if index not in seen and not self.ctx.tree.exists(path):
                self.ctx.add(ProblemCode.MISSING_ARTIFACT, path,
                             f"request of round {index} is missing: the driver writes it before the round runs and compares it on resume")

    def _feedback(self, path: str, index: int, found: object, rows: list[dict[str, object]]) -> None:
        want = expected_feedback(rows[:index])
        where = first_difference(found, want)
        if where is not None:
            self.ctx.add(
                ProblemCode.BOUND_HASH_MISMATCH, path,
                f"request of round {index} is not the feedback search-state.json's history gives that round "
                f"(first difference: {where}); the driver refuses to resume with it",
            )

    def _requests_due(self, rows: list[dict[str, object]], status: object) -> list[int]:
        """The rounds whose request must exist: every round in the history, and, while
        the search is running or paused, the next one once its round inputs or directory
        were written (the request is written before either)."""
        due = list(range(len(rows)))
        nxt = f"round-{len(rows):02d}"
        running = isinstance(status, str) and (status == "searching" or status.startswith("paused"))
        written = self.ctx.tree.exists(join(self.ctx.root, "round-inputs", nxt)) or self.ctx.tree.exists(join(self.ctx.root, "rounds", nxt))
        if running and written:
            due.append(len(rows))
        return due

    def round_inputs(self) -> None:
        """``round-inputs/round-NN/{public,media}.json``: they parse; media episodes are bound."""
        root = self.ctx.root
        for rdir in self.ctx.tree.list_dirs(join(root, "round-inputs")):
            self.ctx.files.json_file(join(rdir, "public.json"))
            media_path = join(rdir, "media.json")
            media = self.ctx.files.json_file(media_path)
            for j, ep in enumerate(as_list(as_dict(media).get("episodes"))):
                ep = as_dict(ep)
                self.ctx.refs.written(
                    ep.get("path"), ep.get("sha256"), rel_base=root, referrer=media_path,
                    what=f"round-inputs {base(rdir)} media episode {j}",
                )

    def round_dirs(self) -> list[str]:
        """The ``rounds/round-NN`` directories of the search, in order."""
        return [d for d in self.ctx.tree.list_dirs(join(self.ctx.root, "rounds")) if ROUND_DIR_RE.match(base(d))]

    # ------------------------------------------------------------------ run directory
    def empty_round(self, run: str) -> bool:
        """A round directory with nothing in it (reported: no resume can read it)."""
        tree = self.ctx.tree
        if tree.dir_files.get(run) or tree.dir_dirs.get(run):
            return False
        self.ctx.add(
            ProblemCode.MISSING_ARTIFACT,
            join(run, "run-inputs.json"),
            f"round directory {base(run)} is empty (a crash between mkdir and the first write?): "
            "without run-inputs.json every resume of this search fails",
        )
        return True

    def run_config(self, run: str, label: str) -> object:
        """The run config (``run-inputs.json`` identity), None when unreadable."""
        inputs = self.ctx.files.bound_file(
            join(run, "run-inputs.json"), required=f"{label} run-inputs.json (a run directory without it cannot be resumed)"
        )
        return inputs.identity if inputs is not None and inputs.form in ("plain", "gzip") else None

    def note_run_written(self, identity: dict[str, object], run: str, *, is_round: bool) -> None:
        """Where the driver wrote this run directory: its absolute ``output_dir`` (a round's
        also says where the search was written)."""
        rec_out = identity.get("output_dir")
        if not (isinstance(rec_out, str) and rec_out.startswith("/")):
            return
        if not is_round:
            self.ctx.add_written_root(rec_out, run)
            return
        self.ctx.paths.add_written(rec_out, run)
        parent = posixpath.dirname(rec_out.rstrip("/"))
        if posixpath.basename(parent) == "rounds":
            self.ctx.paths.add_written(posixpath.dirname(parent), self.ctx.root)

    def note_media_written(self, attempts: list[dict[str, object]], run: str) -> None:
        """A relative ``--output-dir``: the absolute ``psd_media`` image paths still say
        where the run was written (only then: they are no better evidence than output_dir)."""
        if self.ctx.paths.knows_written_location:
            return
        for row in attempts:
            for d in run_dirs_from_media(as_dict(row.get("psd_media")).get("image_paths")):
                self.ctx.paths.add_written(d, run)
