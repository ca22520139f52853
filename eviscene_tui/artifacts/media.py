"""``psd_media`` (ifv-psd-media-v1/v2/v3) and its verification against ``media/``.

psd-run-format §2.12: an attempt record carries ``psd_media`` when the image-pad
token appears in the student or teacher prompt ids. Each maximal run of
consecutive image-pad ids is one image; a run's length is ``t*h*w / merge**2``
of that image's grid.

- :func:`parse_psd_media` normalises every schema into :class:`PsdMedia` with
  ``.images`` (sha256, declared path, grid) and returns Problems instead of raising.
- :func:`verify_media` checks the image files under ``<run_dir>/media/`` (absolute
  paths written on the driver's machine are mapped to ``media/<sha256>.image``),
  the image-pad runs of the student and teacher prompts against the image list and
  grids, and that teacher and student were conditioned on the same images.

No Textual import here (architecture rule).
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eviscene_tui.artifacts.fileio import ReadRefused, not_regular, open_regular
from eviscene_tui.artifacts.jsonio import sha256_file
from eviscene_tui.artifacts.problems import Problem, ProblemCode

MEDIA_SCHEMAS = ("ifv-psd-media-v1", "ifv-psd-media-v2", "ifv-psd-media-v3")

# Vision id families (vllm-protocol §4). Chosen from config.json / model_type or
# /tokenizer_info, never from the model name.
VISION_FAMILIES: dict[str, dict[str, int]] = {
    "qwen3_5": {
        "vision_start": 248053,
        "vision_end": 248054,
        "vision_pad": 248055,
        "image_pad": 248056,
        "video_pad": 248057,
    },
    "qwen2_5_vl": {
        "vision_start": 151652,
        "vision_end": 151653,
        "vision_pad": 151654,
        "image_pad": 151655,
        "video_pad": 151656,
    },
}
# model_type values -> family
MODEL_TYPE_FAMILY: dict[str, str] = {
    "qwen3_5": "qwen3_5",
    "qwen3_5_moe": "qwen3_5",
    "qwen3_5_vl": "qwen3_5",
    "qwen2_vl": "qwen2_5_vl",
    "qwen2_5_vl": "qwen2_5_vl",
    "qwen3_vl": "qwen2_5_vl",
    "qwen3_vl_moe": "qwen2_5_vl",
}
DRIVER_IMAGE_TOKEN = 248056  # IMAGE_TOKEN in psd_media.py
DEFAULT_MERGE_SIZE = 2

ImageStatus = Literal["ok", "missing", "sha_mismatch", "unreadable"]


class MediaImage(BaseModel):
    model_config = ConfigDict(frozen=True)

    sha256: str | None = None
    path: str | None = None
    grid_thw: tuple[int, int, int] | None = None


class PsdMedia(BaseModel):
    """Any psd_media schema, with the normalised image list in ``images``."""

    model_config = ConfigDict(extra="allow")

    schema_version: str
    processor_id: str | None = None
    processor_config: dict[str, Any] | None = None
    merge_size: int | None = None
    pixel_values_sha256: Any = None
    images: list[MediaImage] = Field(default_factory=list)

    @property
    def effective_merge_size(self) -> int:
        if self.merge_size:
            return self.merge_size
        cfg = self.processor_config or {}
        value = cfg.get("merge_size") or cfg.get("spatial_merge_size")
        return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MERGE_SIZE

    @property
    def merge_size_known(self) -> bool:
        cfg = self.processor_config or {}
        return bool(self.merge_size) or isinstance(cfg.get("merge_size") or cfg.get("spatial_merge_size"), int)

    def expected_run_length(self, index: int) -> int | None:
        """``t*h*w / merge**2`` when the grid of image ``index`` is known."""
        if index >= len(self.images):
            return None
        grid = self.images[index].grid_thw
        if grid is None:
            return None
        t, h, w = grid
        m = self.effective_merge_size
        return (t * h * w) // (m * m)


def _as_list(value: Any) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _grids(value: Any) -> tuple[list[tuple[int, int, int] | None], str | None]:
    """``image_grid_thw`` as ``[t,h,w]`` or ``[[t,h,w], …]`` -> list of grids."""
    if value is None:
        return [], None
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [(value[0], value[1], value[2])], None
    if isinstance(value, (list, tuple)):
        out: list[tuple[int, int, int] | None] = []
        bad = None
        for row in value:
            if isinstance(row, (list, tuple)) and len(row) == 3 and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in row):
                out.append((row[0], row[1], row[2]))
            else:
                out.append(None)
                bad = "an image_grid_thw row is not three positive integers"
        return out, bad
    return [], "image_grid_thw is neither [t,h,w] nor a list of them"


def _images(shas: list[Any], paths: list[Any], grids: list[Any]) -> list[MediaImage]:
    """One MediaImage per position of the longer of ``shas`` / ``paths`` (non-strings -> None)."""
    out = []
    for i in range(max(len(shas), len(paths))):
        sha = shas[i] if i < len(shas) else None
        p = paths[i] if i < len(paths) else None
        out.append(
            MediaImage(
                sha256=sha if isinstance(sha, str) else None,
                path=p if isinstance(p, str) else None,
                grid_thw=grids[i] if i < len(grids) else None,
            )
        )
    return out


def parse_psd_media(obj: Any, *, path: str = "psd_media") -> tuple[PsdMedia | None, list[Problem]]:
    """Normalise a psd_media object. ``path`` labels Problems (e.g. the attempts file)."""
    problems: list[Problem] = []

    def problem(code: ProblemCode, message: str) -> None:
        problems.append(Problem(code=code, path=path, message=message))

    if obj is None:
        return None, []
    if not isinstance(obj, dict):
        problem(ProblemCode.SCHEMA_UNKNOWN, f"psd_media is a {type(obj).__name__}, expected an object")
        return None, problems
    schema = obj.get("schema_version")
    if schema not in MEDIA_SCHEMAS:
        problem(
            ProblemCode.SCHEMA_UNKNOWN,
            f"psd_media schema_version {schema!r} is not one of {', '.join(MEDIA_SCHEMAS)}",
        )
        return None, problems

    data = dict(obj)
    images: list[MediaImage] = []
    if schema == "ifv-psd-media-v3":
        shas = _as_list(data.get("image_sha256")) or []
        paths = _as_list(data.get("image_paths")) or []
        if len(shas) != len(paths) and paths:
            problem(
                ProblemCode.MEDIA_MISMATCH,
                f"psd_media lists {len(shas)} image_sha256 but {len(paths)} image_paths",
            )
        grids, bad = _grids(data.get("image_grid_thw"))
        if bad:
            problem(ProblemCode.MEDIA_MISMATCH, f"psd_media {bad}")
        images.extend(_images(shas, paths, grids))
    else:
        shas = _as_list(data.get("sha256")) or []
        paths = _as_list(data.get("path")) or []
        grids, bad = _grids(data.get("image_grid_thw"))
        if bad:
            problem(ProblemCode.MEDIA_MISMATCH, f"psd_media {bad}")
        n = max(len(shas), len(paths))
        if grids and n and len(grids) != n:
            problem(
                ProblemCode.MEDIA_MISMATCH,
                f"psd_media lists {n} image(s) but image_grid_thw has {len(grids)} row(s)",
            )
        images.extend(_images(shas, paths, grids))
    for i, img in enumerate(images):
        if img.sha256 is None:
            problem(ProblemCode.MEDIA_MISMATCH, f"psd_media image #{i + 1} has no sha256")
    merge = data.get("merge_size")
    if merge is not None and not (isinstance(merge, int) and not isinstance(merge, bool) and merge > 0):
        problem(ProblemCode.MEDIA_MISMATCH, f"psd_media merge_size {merge!r} is not a positive integer")
        merge = None
    pcfg = data.get("processor_config")
    pid = data.get("processor_id")
    fields = {
        "schema_version": schema,
        "processor_id": pid if isinstance(pid, str) else None,
        "processor_config": pcfg if isinstance(pcfg, dict) else None,
        "merge_size": merge,
        "pixel_values_sha256": data.get("pixel_values_sha256"),
        "images": images,
    }
    extra = {k: v for k, v in data.items() if k not in fields}
    try:
        media = PsdMedia(**extra, **fields)
    except (ValidationError, TypeError) as exc:  # fields that do not fit, or keys that are not names
        problem(ProblemCode.SCHEMA_UNKNOWN, f"psd_media does not fit the model: {exc}")
        return None, problems
    return media, problems


# --------------------------------------------------------------------------- id helpers
def image_pad_runs(ids: Sequence[int], pad_id: int) -> list[tuple[int, int]]:
    """(start, length) of every maximal run of ``pad_id`` in ``ids``."""
    runs: list[tuple[int, int]] = []
    start = -1
    for i, tok in enumerate(ids):
        if tok == pad_id:
            if start < 0:
                start = i
        elif start >= 0:
            runs.append((start, i - start))
            start = -1
    if start >= 0:
        runs.append((start, len(ids) - start))
    return runs


def family_for_model_type(model_type: str | None) -> str | None:
    if not isinstance(model_type, str):
        return None
    return MODEL_TYPE_FAMILY.get(model_type.strip().lower())


def family_from_ids(ids: Iterable[int]) -> str | None:
    """Guess the family from framing: vision_start immediately followed by image/video pad.

    Used only when no config or /tokenizer_info says which family it is. Fast on
    long lists (``list.index`` scans).
    """
    seq = ids if isinstance(ids, list) else list(ids)
    n = len(seq)
    best, best_count = None, 0
    for name, table in VISION_FAMILIES.items():
        vs = table["vision_start"]
        pads = (table["image_pad"], table["video_pad"])
        count = 0
        pos = 0
        while True:
            try:
                i = seq.index(vs, pos)
            except ValueError:
                break
            if i + 1 < n and seq[i + 1] in pads:
                count += 1
            pos = i + 1
        if count > best_count:
            best, best_count = name, count
    return best


def pad_id_for(ids_or_family: str | Iterable[int] | None) -> int | None:
    """Image-pad id for a family name / model_type, or guessed from prompt ids.

    For ids: the family whose ``vision_start`` is followed by its ``image_pad``;
    otherwise the driver's IMAGE_TOKEN (248056) when present; otherwise None.
    """
    if ids_or_family is None:
        return None
    if isinstance(ids_or_family, str):
        fam = ids_or_family if ids_or_family in VISION_FAMILIES else family_for_model_type(ids_or_family)
        return VISION_FAMILIES[fam]["image_pad"] if fam else None
    ids = list(ids_or_family)
    fam = family_from_ids(ids)
    if fam:
        return VISION_FAMILIES[fam]["image_pad"]
    if DRIVER_IMAGE_TOKEN in ids:
        return DRIVER_IMAGE_TOKEN
    return None


def estimate_pad_count(width: int, height: int, processor_config: dict[str, Any] | None, merge_size: int) -> int | None:
    """Qwen-VL ``smart_resize`` estimate of an image's merged-patch count.

    Only when ``processor_config`` gives ``patch_size``; shown as an estimate, never
    used to raise a Problem (processor variants differ).
    """
    cfg = processor_config if isinstance(processor_config, dict) else {}
    patch = cfg.get("patch_size")
    if not _pos_int(patch) or not _pos_int(merge_size) or width <= 0 or height <= 0 or patch > 4096:
        return None
    size = _v if isinstance(_v := cfg.get("size"), dict) else {}
    min_pixels = next((v for v in (cfg.get("min_pixels"), size.get("shortest_edge")) if _pos_int(v)), 56 * 56)
    max_pixels = next((v for v in (cfg.get("max_pixels"), size.get("longest_edge")) if _pos_int(v)), 28 * 28 * 1280)
    factor = patch * merge_size
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return (h_bar // patch) * (w_bar // patch) // (merge_size * merge_size)


def _pos_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# --------------------------------------------------------------------------- verification
class ImageCheck(BaseModel):
    index: int
    sha256: str | None
    declared_path: str | None
    resolved_path: str | None
    status: ImageStatus
    actual_sha256: str | None = None
    size_bytes: int | None = None
    width: int | None = None
    height: int | None = None
    format: str | None = None
    grid_thw: tuple[int, int, int] | None = None
    expected_run_length: int | None = None
    estimated_run_length: int | None = None
    message: str = ""


class MediaReport(BaseModel):
    schema_version: str
    processor_id: str | None
    merge_size: int
    merge_size_known: bool
    pad_id: int | None
    images: list[ImageCheck]
    student_runs: list[tuple[int, int]] | None = None
    teacher_runs: list[tuple[int, int]] | None = None
    conditioning_equal: bool | None = None
    problems: list[Problem] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _basename(path: str) -> str:
    if "\\" in path and "/" not in path:
        return PureWindowsPath(path).name
    return PurePosixPath(path).name


def _within(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except (ValueError, OSError):
        return False


_SHA_RE = re.compile(r"[0-9a-fA-F]{64}")
_SAFE_NAME_RE = re.compile(r"[^/\\\x00]+")


def _candidates(run_dir: Path, img: MediaImage) -> list[Path]:
    """Where image ``img`` may live inside ``run_dir`` (never outside it)."""
    out: list[Path] = []
    media_dir = run_dir / "media"
    if img.sha256 and _SHA_RE.fullmatch(img.sha256):
        out.append(media_dir / f"{img.sha256.lower()}.image")
    if img.path and "\x00" not in img.path:
        p = img.path
        is_abs = p.startswith("/") or PureWindowsPath(p).is_absolute()
        name = _basename(p)
        ok_name = bool(name) and name not in (".", "..") and _SAFE_NAME_RE.fullmatch(name) is not None
        if is_abs:
            if ok_name:
                out.append(media_dir / name)
        else:
            rel = run_dir / p
            if _within(rel, run_dir):
                out.append(rel)
            if ok_name:
                out.append(media_dir / name)
    seen: set[str] = set()
    unique = []
    for c in out:
        if str(c) not in seen:
            seen.add(str(c))
            unique.append(c)
    return unique


def _dimensions(path: Path) -> tuple[int | None, int | None, str | None]:
    try:
        from PIL import Image  # lazy: Pillow loads only when an image's size is read (off the open and check paths)
    except ImportError:  # unknown size: the caller shows "?"
        return None, None, None
    try:
        with open_regular(path) as fh, Image.open(fh) as im:
            return int(im.width), int(im.height), str(im.format or "") or None
    except (OSError, ValueError, Image.DecompressionBombError):  # unknown size: the caller shows "?"
        return None, None, None


def _short(sha: str | None) -> str:
    return (sha or "?")[:12]


def _find_image(root: Path, img: MediaImage) -> tuple[Path | None, Problem | None]:
    """The first candidate file of ``img`` that exists inside the run directory, or the
    refusal of the first that exists but may not be read (a symlink leading out of the
    run directory, a FIFO, a device): such a file is never opened."""
    for cand in _candidates(root, img):
        try:
            if not os.path.lexists(cand):
                continue
            if not _within(cand, root):
                return None, Problem(code=ProblemCode.PATH_OUTSIDE_ROOT, path=str(cand),
                                     message="media file: a symlink leads outside the run directory; not read")
            st = cand.stat()
        except (OSError, ValueError):
            continue
        if not stat.S_ISREG(st.st_mode):
            return None, not_regular(str(cand), st.st_mode).problem()
        return cand, None
    return None, None


def _check_image(media: PsdMedia, i: int, img: MediaImage, root: Path, read_dimensions: bool) -> tuple[ImageCheck, Problem | None]:
    """One image on disk: found, readable, its bytes hashing to the declared sha256."""
    expected = media.expected_run_length(i)
    found, refused = _find_image(root, img)
    if refused is not None:
        check = ImageCheck(
            index=i, sha256=img.sha256, declared_path=img.path, resolved_path=None, status="unreadable",
            grid_thw=img.grid_thw, expected_run_length=expected, message=f"image #{i + 1}: {refused.message}",
        )
        return check, refused
    if found is None:
        where = f"media/{img.sha256}.image" if img.sha256 else "media/"
        declared = f" (declared {img.path})" if img.path else ""
        msg = f"image #{i + 1} sha256 {_short(img.sha256)}… not found at {where}{declared}"
        check = ImageCheck(
            index=i, sha256=img.sha256, declared_path=img.path, resolved_path=None, status="missing",
            grid_thw=img.grid_thw, expected_run_length=expected, message=msg,
        )
        return check, Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(root / where), message=msg)
    try:
        actual = sha256_file(found)
        size = found.stat().st_size
    except OSError as exc:
        why = exc.message if isinstance(exc, ReadRefused) else f"cannot be read: {exc.strerror or exc}"
        msg = f"image #{i + 1} at {found}: {why}"
        check = ImageCheck(
            index=i, sha256=img.sha256, declared_path=img.path, resolved_path=str(found), status="unreadable",
            grid_thw=img.grid_thw, expected_run_length=expected, message=msg,
        )
        code = exc.code if isinstance(exc, ReadRefused) else ProblemCode.MISSING_ARTIFACT
        return check, Problem(code=code, path=str(found), message=msg)
    width, height, fmt = _dimensions(found) if read_dimensions else (None, None, None)
    estimated = estimate_pad_count(width, height, media.processor_config, media.effective_merge_size) if width and height else None
    problem = None
    status: ImageStatus = "ok"
    msg = "sha256 verified"
    if img.sha256 and actual != img.sha256.lower():
        rel = os.path.relpath(found, root)
        msg = (
            f"image #{i + 1} {rel}: content sha256 {_short(actual)}… differs from the declared "
            f"{_short(img.sha256)}… (file replaced or tampered with)"
        )
        problem = Problem(code=ProblemCode.MEDIA_MISMATCH, path=str(found), message=msg)
        status = "sha_mismatch"
    check = ImageCheck(
        index=i, sha256=img.sha256, declared_path=img.path, resolved_path=str(found), status=status,
        actual_sha256=actual, size_bytes=size, width=width, height=height, format=fmt,
        grid_thw=img.grid_thw, expected_run_length=expected, estimated_run_length=estimated, message=msg,
    )
    return check, problem


def _pad_run_problems(
    media: PsdMedia, role: str, runs: list[tuple[int, int]], pad_id: int | None, label: str
) -> list[Problem]:
    """One image-pad run per image in a prompt, each as long as its grid gives."""
    problems: list[Problem] = []
    n_images = len(media.images)
    merge = media.effective_merge_size
    if len(runs) != n_images:
        problems.append(
            Problem(
                code=ProblemCode.MEDIA_MISMATCH,
                path=label,
                message=(
                    f"{role} prompt has {len(runs)} image-pad run(s)"
                    + (f" of id {pad_id}" if pad_id is not None else " (no image-pad id found)")
                    + f" but psd_media lists {n_images} image(s)"
                ),
            )
        )
    for k, (start, length) in enumerate(runs[:n_images]):
        expected = media.expected_run_length(k)
        if expected is not None and expected != length:
            grid = media.images[k].grid_thw
            problems.append(
                Problem(
                    code=ProblemCode.MEDIA_MISMATCH,
                    path=label,
                    message=(
                        f"{role} prompt image #{k + 1} has {length} pad ids at offset {start}, but grid "
                        f"{list(grid or ())} with merge size {merge} gives {expected}"
                    ),
                )
            )
    return problems


def _guess_pad_id(student_prompt_ids: Sequence[int] | None, teacher_prompt_ids: Sequence[int] | None) -> int | None:
    probe: list[int] = []
    if student_prompt_ids:
        probe.extend(student_prompt_ids)
    if teacher_prompt_ids:
        probe.extend(teacher_prompt_ids)
    return pad_id_for(probe) if probe else None


def verify_media(
    media: PsdMedia,
    run_dir: str | os.PathLike[str],
    *,
    student_prompt_ids: Sequence[int] | None = None,
    teacher_prompt_ids: Sequence[int] | None = None,
    pad_id: int | None = None,
    record_path: str | None = None,
    read_dimensions: bool = True,
) -> MediaReport:
    """Check images on disk, image-pad runs vs images and grids, and teacher == student conditioning.

    ``pad_id``: the image-pad id of the served vocabulary when known (from config or
    /tokenizer_info); otherwise guessed from the prompt ids (:func:`pad_id_for`).
    ``record_path`` labels problems not tied to one image file (default
    ``<run_dir>/repair_attempts.jsonl``).
    """
    root = Path(run_dir)
    label = record_path or str(root / "repair_attempts.jsonl")
    problems: list[Problem] = []
    checks: list[ImageCheck] = []
    for i, img in enumerate(media.images):
        check, problem = _check_image(media, i, img, root, read_dimensions)
        checks.append(check)
        if problem is not None:
            problems.append(problem)
    if pad_id is None:
        pad_id = _guess_pad_id(student_prompt_ids, teacher_prompt_ids)

    runs: dict[str, list[tuple[int, int]] | None] = {}
    for role, ids in (("student", student_prompt_ids), ("teacher", teacher_prompt_ids)):
        found = None if ids is None else (image_pad_runs(ids, pad_id) if pad_id is not None else [])
        if found is not None:
            problems.extend(_pad_run_problems(media, role, found, pad_id, label))
        runs[role] = found
    student_runs, teacher_runs = runs["student"], runs["teacher"]
    equal: bool | None = None
    if student_runs is not None and teacher_runs is not None:
        s_lengths = [n for _, n in student_runs]
        t_lengths = [n for _, n in teacher_runs]
        equal = s_lengths == t_lengths
        if not equal:
            problems.append(
                Problem(
                    code=ProblemCode.MEDIA_MISMATCH,
                    path=label,
                    message=(
                        "teacher and student visual conditioning differs: image-pad runs "
                        f"student {s_lengths} vs teacher {t_lengths}"
                    ),
                )
            )

    return MediaReport(
        schema_version=media.schema_version,
        processor_id=media.processor_id,
        merge_size=media.effective_merge_size,
        merge_size_known=media.merge_size_known,
        pad_id=pad_id,
        images=checks,
        student_runs=student_runs,
        teacher_runs=teacher_runs,
        conditioning_equal=equal,
        problems=problems,
    )


__all__ = [
    "DRIVER_IMAGE_TOKEN",
    "ImageCheck",
    "MEDIA_SCHEMAS",
    "MODEL_TYPE_FAMILY",
    "MediaImage",
    "MediaReport",
    "PsdMedia",
    "VISION_FAMILIES",
    "estimate_pad_count",
    "family_for_model_type",
    "family_from_ids",
    "image_pad_runs",
    "pad_id_for",
    "parse_psd_media",
    "verify_media",
]
