"""Full integrity check of one case (psd-run-format §6).

``check_case(ref) -> list[Problem]`` recomputes every hash the driver binds and
reports, with the problem codes of ``artifacts.problems``:

- files that are never opened: a FIFO, device, socket or directory where a file belongs
  (``not_regular_file``), a file bigger than any real file of its kind
  (``file_too_large``, the one table ``artifacts.fileio.LIMITS``), a symlink leading out
  of the case (``path_outside_root``); each is reported once, by the walk, and no
  checker reads it;

- bound envelopes (run-inputs, hint-proposals, proposer-response,
  continuations/hint-NN plain and gzip, search-state, requests/round-NN):
  ``payload_sha256`` and gzip archive checks (via ``jsonio.read_bound``), plus the
  continuation identity (``run`` = canonical sha of the run config, ``hint`` = the
  hint's sha) and the request identity (``search`` = canonical sha of the search
  identity);
- ``search-state.json`` ``rounds[].files`` maps and the absolute episode paths of
  its records, ``round-inputs/round-NN/media.json`` episodes, ``run-inputs.json``
  and search ``inputs`` ``{path, sha256}`` bindings. Absolute paths written on the
  driver's machine are mapped into the case by their path relative to the recorded
  ``output_dir`` / round ``directory`` (and the wrapper root for ``repairs/<key>``);
  input bindings that do not map into the case are skipped silently;
- ``hinted_teacher_episode_trace_sha256`` against the episode file, continuations
  for attempts, judge files named by ``gemini-verification-bundle.json``;
- token captures (attempt ``repair_rollout_token_capture``, candidate
  ``rollout_token_capture``, the teacher action step of each continuation, and the
  source trace's failure step when the trace is reachable and < 20 MB);
- ``psd_media`` (through ``artifacts.media``): media files and image-pad runs;
- leftover ``*.tmp``, symlinks leaving the case, unreadable directories, torn
  JSONL lines (a torn last line of a runtime ``events.jsonl`` is normal), invalid
  JSON, unknown ``schema_version`` strings, content-addressed names
  (``media/<sha>.image``, runtime ``artifacts/sha256/``, ``judge-cache/``);
- slate roots: ``unsupported_layout`` (plus the generic file checks).

One checker per concern, each shared by both layouts (``layouts.CaseCheck`` composes
them for a search root and for a run directory): ``tree`` (the walk), ``files`` (reads,
schemas, hashes), ``references`` (recorded ``{path, sha256}`` references), ``inputs``
(bound inputs), ``rounds`` (manifests, search state, rounds), ``records`` (ledgers),
``captures`` (token captures), ``continuations``, ``media_binding``, ``proposals``,
``judge``, ``bindings`` (what the driver compares on resume that no hash covers: a round's
run identity against the search inputs, the proposals' identity against the run config, the
verification bundle and source trace a finalization binds; ``rounds`` also compares each
``requests/round-NN.json`` with the feedback the search history gives that round,
``artifacts.feedback``), ``runtime`` (what the run's runtime archives and the source rollout's reference
is there: blobs, request manifests, events logs; the source store checked in full),
``remaining`` (the generic pass).

Reading only: nothing is written, locked or opened for writing (the driver's lock
file is never opened either). ``check_case`` never raises.

No Textual import here (architecture rule).
"""

from __future__ import annotations

from eviscene_tui.artifacts.integrity.context import CaseContext
from eviscene_tui.artifacts.integrity.layouts import CaseCheck
from eviscene_tui.artifacts.integrity.media_binding import pad_id_for_ids, pad_runs
from eviscene_tui.artifacts.integrity.reading import read_json, read_jsonl, safe_read_bound
from eviscene_tui.artifacts.jsonio import Parsed
from eviscene_tui.artifacts.layout import CaseRef
from eviscene_tui.artifacts.schemas import KNOWN_SCHEMAS
from eviscene_tui.artifacts.paths import InputProvenance, PathMap
from eviscene_tui.artifacts.problems import Problem, ProblemCode


def check_case(
    ref: CaseRef,
    *,
    cache: dict[str, bytes] | None = None,
    parsed: Parsed | None = None,
    path_map: PathMap | None = None,
    provenance: list[InputProvenance] | None = None,
) -> list[Problem]:
    """Every problem found in one case (problem paths are absolute).

    ``cache``: when given, the bytes of the files ``summarize_case`` reads (manifest and
    ledgers) are left in it, keyed by absolute path, so a report reads them once.
    ``parsed``: when given, what was parsed of those cached bytes is left in it too
    (``jsonio.Parsed``: JSON files and plain JSONL ledgers), so the summary parses them
    not again. ``path_map``: explicit ``OLD=NEW`` mappings for inputs copied elsewhere
    (``artifacts.paths``). ``provenance``: when given, one :class:`InputProvenance` per
    bound input checked is appended (where it was found, by which rule, its sha status).
    Never raises: an unexpected internal error becomes one Problem on the case root.
    """
    ctx = CaseContext(ref, cache, parsed, path_map=path_map, provenance=provenance)
    try:
        CaseCheck(ctx).run()
    except Exception as exc:  # noqa: BLE001 - hostile input must not crash a report: it becomes a visible Problem
        ctx.add(
            ProblemCode.JSON_INVALID,
            str(ref.path),
            f"integrity check stopped early on unexpected content: {type(exc).__name__}: {exc}",
        )
    return ctx.findings.problems


__all__ = [
    "KNOWN_SCHEMAS",
    "check_case",
    "pad_id_for_ids",
    "pad_runs",
    "read_json",
    "read_jsonl",
    "safe_read_bound",
]
