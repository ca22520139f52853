"""Runtime archives (psd-run-format §2.13): events, context ledger, content-addressed blobs,
and the reconstruction of an archived policy request.

Store root: ``<run>/runtime/<safe(case_id)>/<safe(attempt_id)>/`` holding ``events.jsonl``,
``context/req-NNNNNN.json`` (``ifv-context-ledger-v1``), ``artifacts/sha256/<2hex>/<sha>.<ext>``
with a ``.meta.json`` beside it, ``archive/items.jsonl`` and ``snapshots/``.

Convention where the reference is vague (also written to /tmp/runtime-archive-convention.md
for the samples generator):

- A context item is ``{"kind", "artifact": {"sha256", "path", "media_type", "size_bytes"},
  "media": [<artifact ref>...], "content_hash"}``. ``artifact.path`` is relative to the
  store root; the blob is found by sha first (``artifacts/sha256/<sha[:2]>/<sha>.*``), by
  ``path`` second. A bare string artifact is read as a sha (64 hex) or a path.
- Blob sha = sha256 of the raw file bytes; it is verified on every read
  (``file_hash_mismatch``). The meta file is ``<sha>.meta.json`` (``<sha>.<ext>.meta.json``
  also accepted).
- ``system_prompt`` blobs are UTF-8 text (a JSON string is also accepted);
  ``input_payload`` / ``tool_schema`` / ``response_format`` / ``generation_config`` blobs
  are JSON. One ``tool_schema`` item per tool (an item holding a list is flattened).
- Images inside ``input_payload`` are ``{"type": "image_ref", "sha256", "media_type"}``
  parts; the item's ``media`` list names them in order. Reconstruction replaces each with
  ``{"type": "image_url", "image_url": {"url": "data:<mime>;base64,..."}}``.
- Request ids (``req-NNNNNN``) restart in every store, so a request is only ever looked
  up through its :class:`RuntimeStore`.

Reading never writes anything. No Textual import here.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from eviscene_tui.artifacts.fileio import LIMITS, ReadRefused, not_regular, read_regular
from eviscene_tui.artifacts.jsonio import jsonl_lines, read_json
from eviscene_tui.artifacts.models import (
    ArtifactRef,
    ContextItem,
    ContextRequest,
    RuntimeEvent,
    StoreDescriptor,
    parse_model,
)
from eviscene_tui.artifacts.problems import Problem, ProblemCode

_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
IMAGE_REF_TYPES = frozenset({"image_ref", "image_reference", "archived_image"})
MAX_BLOB_BYTES = LIMITS["blob"]


# --------------------------------------------------------------------------- path safety
def check_regular_file(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Problem | None:
    """None when ``path`` may be read: it is a regular file (after following symlinks) and,
    when ``root`` is given, a symlink in it does not lead outside ``root``. Otherwise a
    Problem (``path_outside_root`` / ``not_regular_file``). A missing file gives None
    (callers report missing files themselves). The reader then opens it through
    ``fileio`` (non-blocking, checked again on the open descriptor)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:  # loops, permission
        return Problem(code=ProblemCode.JSON_INVALID, path=str(p), message=f"cannot open: {exc.strerror or type(exc).__name__}")
    if root is not None:
        try:
            resolved = p.resolve()
            base = Path(root).resolve()
        except (OSError, RuntimeError):
            return Problem(code=ProblemCode.JSON_INVALID, path=str(p), message="path cannot be resolved")
        if not _is_within(resolved, base):
            return Problem(code=ProblemCode.PATH_OUTSIDE_ROOT, path=str(p), message="symlink leads outside the case root; not read")
    if not stat.S_ISREG(st.st_mode):
        return not_regular(str(p), st.st_mode).problem()
    return None


# --------------------------------------------------------------------------- containment
# (where a recorded store path is looked for is decided by artifacts.paths)
def _is_within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


# --------------------------------------------------------------------------- image helpers
def image_size(data: bytes) -> tuple[int | None, int | None]:
    """(width, height) from a PNG, GIF or JPEG header when cheaply known, else (None, None)."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24 and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return int(w), int(h)
        if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
            w, h = struct.unpack("<HH", data[6:10])
            return int(w), int(h)
        if data[:2] == b"\xff\xd8":
            i = 2
            n = len(data)
            while i + 9 < n and i < 1 << 20:
                if data[i] != 0xFF:
                    i += 1
                    continue
                marker = data[i + 1]
                if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                    i += 2
                    continue
                length = struct.unpack(">H", data[i + 2 : i + 4])[0]
                if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                    h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                    return int(w), int(h)
                i += 2 + length
    except (struct.error, IndexError):
        pass
    return None, None


def sniff_mime(data: bytes) -> str | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:2] == b"\xff\xd8":
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass
class ArchivedImage:
    sha256: str
    mime: str
    data: bytes
    width: int | None = None
    height: int | None = None
    verified: bool = True

    @property
    def size_bytes(self) -> int:
        return len(self.data)

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def to_dict(self, *, with_data: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sha256": self.sha256,
            "mime": self.mime,
            "size_bytes": len(self.data),
            "width": self.width,
            "height": self.height,
            "verified": self.verified,
        }
        if with_data:
            out["data_url"] = self.data_url()
        return out


@dataclass
class ArchivedRequest:
    """A policy request rebuilt from the archive (or from a step's ``policy_input``).

    ``input_payload`` has images restored as data-URL parts; ``input_payload_refs`` keeps
    the archived form with ``image_ref`` parts (small; good for display and records).
    ``source`` is ``"archive"`` or ``"policy_input"``.
    """

    request_id: str | None
    store_path: Path | None
    system_prompt: str | None = None
    input_payload: Any = None
    input_payload_refs: Any = None
    tool_schemas: list[Any] = field(default_factory=list)
    response_format: Any = None
    generation_config: dict[str, Any] = field(default_factory=dict)
    images: list[ArchivedImage] = field(default_factory=list)
    extra_items: dict[str, Any] = field(default_factory=dict)
    #: images whose bytes do not match their sha256: NOT restored into ``input_payload``
    rejected_images: list[ArchivedImage] = field(default_factory=list)
    ledger: ContextRequest | None = None
    source: str = "archive"

    def to_dict(self, *, with_images: bool = False) -> dict[str, Any]:
        """Plain JSON-able dict. Without ``with_images`` the payload keeps ``image_ref``
        parts and images are listed by hash/size only (never the bytes)."""
        return {
            "request_id": self.request_id,
            "store_path": str(self.store_path) if self.store_path is not None else None,
            "source": self.source,
            "system_prompt": self.system_prompt,
            "input_payload": self.input_payload if with_images else self.input_payload_refs,
            "tool_schemas": list(self.tool_schemas),
            "response_format": self.response_format,
            "generation_config": dict(self.generation_config),
            "images": [img.to_dict(with_data=with_images) for img in self.images],
            "extra_items": dict(self.extra_items),
        }


# --------------------------------------------------------------------------- the store

def _system_prompt_text(data: bytes) -> str:
    """A system prompt blob: plain text, or a JSON string holding it."""
    text = _decode_text(data)
    if text.lstrip().startswith('"'):
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, str):
            text = parsed
    return text


def _add_context_item(req: ArchivedRequest, kind: str, value: Any) -> None:
    """One parsed context item (other than the system prompt and input payloads) into ``req``."""
    if kind in ("tool_schema", "tool_schemas", "tools"):
        if isinstance(value, list):
            req.tool_schemas.extend(value)
        else:
            req.tool_schemas.append(value)
    elif kind == "response_format":
        req.response_format = value
    elif kind == "generation_config":
        if isinstance(value, dict):
            req.generation_config.update(value)
        else:
            req.extra_items["generation_config"] = value
    else:
        req.extra_items.setdefault(kind, []).append(value)

class RuntimeStore:
    """Read-only view of one runtime store directory."""

    def __init__(self, path: str | os.PathLike[str], descriptor: StoreDescriptor | None = None) -> None:
        self.path = Path(path)
        self._descriptor = descriptor
        self.torn_tail = False
        self._events: tuple[list[RuntimeEvent], list[Problem]] | None = None

    def __repr__(self) -> str:  # pragma: no cover
        return f"RuntimeStore({str(self.path)!r})"

    @property
    def exists(self) -> bool:
        return self.path.is_dir()

    @property
    def descriptor(self) -> StoreDescriptor:
        """The descriptor given at construction, else one derived from the directory names."""
        if self._descriptor is not None:
            return self._descriptor
        return StoreDescriptor(
            schema_version="ifv-runtime-events-v1",
            case_id=self.path.parent.name or None,
            attempt_id=self.path.name or None,
            runtime_path=str(self.path),
            events_path=str(self.path / "events.jsonl"),
        )

    # ---------------------------------------------------------------- events
    def events(self, *, refresh: bool = False) -> tuple[list[RuntimeEvent], list[Problem]]:
        """Parse ``events.jsonl``. A torn LAST line (no trailing newline) is skipped
        silently and sets :attr:`torn_tail`; a torn middle line is a problem."""
        if self._events is not None and not refresh:
            return self._events
        path = self.path / "events.jsonl"
        where = str(path)
        events: list[RuntimeEvent] = []
        problems: list[Problem] = []
        self.torn_tail = False
        bad = check_regular_file(path, root=self.path)
        if bad is not None:
            self._events = ([], [bad])
            return self._events
        try:
            data = read_regular(path)
        except ReadRefused as exc:
            self._events = ([], [exc.problem()])
            return self._events
        except FileNotFoundError:
            self._events = ([], [])
            return self._events
        except OSError as exc:
            self._events = ([], [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message=f"cannot read: {exc.strerror}")])
            return self._events
        for number, row, error, at_tail in jsonl_lines(data):
            if error is not None:
                if at_tail:
                    self.torn_tail = True  # a writer mid-line: skipped silently (§2.13)
                    continue
                problems.append(Problem(code=ProblemCode.JSONL_TORN_LINE, path=where, message=f"line {number} does not parse: {error}"))
                continue
            model, _ = parse_model(RuntimeEvent, row)
            if model is None:
                problems.append(
                    Problem(code=ProblemCode.JSON_INVALID, path=where, message=f"line {number} is not an event object")
                )
                continue
            events.append(model)
        self._events = (events, problems)
        return self._events

    # ---------------------------------------------------------------- context ledger
    def request_ids(self) -> list[str]:
        try:
            names = sorted(p.name for p in (self.path / "context").iterdir() if p.suffix == ".json")
        except OSError:
            return []
        return [n[: -len(".json")] for n in names]

    def context_request_path(self, request_id: str) -> Path | None:
        if not isinstance(request_id, str) or not _REQUEST_ID_RE.match(request_id) or request_id in (".", ".."):
            return None
        return self.path / "context" / f"{request_id}.json"

    def context_request(self, request_id: str) -> tuple[ContextRequest | None, list[Problem]]:
        path = self.context_request_path(request_id)
        if path is None:
            return None, [
                Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(self.path / "context"), message=f"invalid request id {request_id!r}")
            ]
        bad = check_regular_file(path, root=self.path)
        if bad is not None:
            return None, [bad]
        raw, problems = read_json(path)
        if raw is None:
            return None, problems
        model, more = parse_model(ContextRequest, raw, str(path), what="context request")
        return model, problems + more

    # ---------------------------------------------------------------- artifacts
    def _shard(self, sha: str) -> Path:
        return self.path / "artifacts" / "sha256" / sha[:2]

    def artifact_path(self, sha: str, ref_path: str | None = None) -> Path | None:
        """The blob file for ``sha`` (any extension, not the meta file), or via ``ref_path``
        (relative to the store root, must stay inside it)."""
        if isinstance(sha, str):
            sha_l = sha.lower()
            if _SHA_RE.match(sha_l):
                shard = self._shard(sha_l)
                try:
                    entries = sorted(shard.iterdir())
                except OSError:
                    entries = []
                for entry in entries:
                    name = entry.name
                    if name.endswith(".meta.json") or name.endswith(".tmp"):
                        continue
                    if name == sha_l or name.startswith(sha_l + "."):
                        return entry
        if isinstance(ref_path, str) and ref_path:
            return self._inside(ref_path)
        return None

    def _inside(self, rel: str) -> Path | None:
        if "\x00" in rel:
            return None
        cand = Path(rel)
        if not cand.is_absolute():
            cand = self.path / cand
        try:
            resolved = cand.resolve()
            root = self.path.resolve()
        except (OSError, RuntimeError):
            return None
        if not _is_within(resolved, root) or not resolved.is_file():
            return None
        return resolved

    def artifact_meta(self, sha: str) -> tuple[dict[str, Any] | None, list[Problem]]:
        if not isinstance(sha, str) or not _SHA_RE.match(sha.lower()):
            return None, []
        sha = sha.lower()
        shard = self._shard(sha)
        candidates = [shard / f"{sha}.meta.json"]
        blob = self.artifact_path(sha)
        if blob is not None:
            candidates.append(blob.with_name(blob.name + ".meta.json"))
        for cand in candidates:
            if cand.is_file():
                bad = check_regular_file(cand, root=self.path)
                if bad is not None:
                    return None, [bad]
                raw, problems = read_json(cand)
                return (raw if isinstance(raw, dict) else None), problems
        return None, []

    def artifact_bytes(
        self, sha: str, ref_path: str | None = None, *, verify: bool = True
    ) -> tuple[bytes | None, list[Problem]]:
        """Read a blob and check its sha256. Missing -> ``missing_artifact``; a sha that
        does not match the bytes -> ``file_hash_mismatch`` (the bytes are still returned)."""
        label = sha if isinstance(sha, str) else str(ref_path)
        path = self.artifact_path(sha, ref_path)
        if path is None:
            if isinstance(ref_path, str) and ref_path and self._inside_raw_outside(ref_path):
                return None, [
                    Problem(code=ProblemCode.PATH_OUTSIDE_ROOT, path=ref_path, message="artifact path leaves the runtime store")
                ]
            where = str(self._shard(sha.lower()) / sha.lower()) if isinstance(sha, str) and _SHA_RE.match(sha.lower()) else str(self.path / "artifacts")
            return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=where, message=f"archived blob {str(label)[:16]}… not found")]
        bad = check_regular_file(path, root=self.path)
        if bad is not None:
            return None, [bad]
        try:
            data = read_regular(path, limit=MAX_BLOB_BYTES)
        except ReadRefused as exc:
            return None, [exc.problem()]
        except OSError as exc:
            return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(path), message=f"cannot read: {exc.strerror}")]
        problems: list[Problem] = []
        if verify and isinstance(sha, str) and _SHA_RE.match(sha.lower()):
            actual = hashlib.sha256(data).hexdigest()
            if actual != sha.lower():
                problems.append(
                    Problem(
                        code=ProblemCode.FILE_HASH_MISMATCH,
                        path=str(path),
                        message=f"blob bytes hash to {actual[:12]}…, expected {sha.lower()[:12]}…",
                    )
                )
        return data, problems

    def _inside_raw_outside(self, rel: str) -> bool:
        cand = Path(rel)
        if not cand.is_absolute():
            cand = self.path / cand
        try:
            return not _is_within(cand.resolve(), self.path.resolve())
        except (OSError, RuntimeError):
            return True

    # ---------------------------------------------------------------- reconstruction
    def _ref_bytes(self, ref: ArtifactRef | None, item_hash: str | None) -> tuple[bytes | None, str | None, list[Problem]]:
        sha = (ref.sha256 if ref is not None else None) or item_hash
        ref_path = ref.path if ref is not None else None
        if sha is None and ref_path is None:
            return None, None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(self.path), message="context item has no artifact")]
        data, problems = self.artifact_bytes(sha or "", ref_path)
        media_type = ref.media_type if ref is not None else None
        if media_type is None and sha:
            meta, _ = self.artifact_meta(sha)
            if isinstance(meta, dict):
                mt = meta.get("media_type") or meta.get("mime")
                media_type = mt if isinstance(mt, str) else None
        return data, media_type, problems

    def load_image(self, sha: str | None, ref: ArtifactRef | None = None) -> tuple[ArchivedImage | None, list[Problem]]:
        data, media_type, problems = self._ref_bytes(ref, sha)
        if data is None:
            return None, problems
        mime = sniff_mime(data) or media_type or "application/octet-stream"
        width, height = image_size(data)
        if ref is not None:
            width = width if width is not None else ref.width
            height = height if height is not None else ref.height
        real_sha = hashlib.sha256(data).hexdigest()
        verified = not any(p.code == ProblemCode.FILE_HASH_MISMATCH for p in problems)
        return ArchivedImage(sha256=(sha or (ref.sha256 if ref else None) or real_sha).lower(), mime=mime, data=data, width=width, height=height, verified=verified), problems

    def reconstruct_request(self, request_id: str) -> tuple[ArchivedRequest | None, list[Problem]]:
        """Rebuild ``{kind: value}`` of an archived request with its images restored."""
        ledger, problems = self.context_request(request_id)
        if ledger is None:
            if not problems:
                problems = [Problem(code=ProblemCode.MISSING_ARTIFACT, path=str(self.path), message=f"request {request_id!r} not archived")]
            return None, problems
        req = ArchivedRequest(request_id=ledger.request_id or request_id, store_path=self.path, ledger=ledger)
        payloads: list[Any] = []
        media_refs: list[ArtifactRef] = []
        system_parts: list[str] = []
        for item in ledger.context_items:
            data, media_type, item_problems = self._ref_bytes(item.artifact, item.content_hash)
            problems.extend(item_problems)
            media_refs.extend(item.media)
            if data is None:
                continue
            kind = item.kind or "unknown"
            if kind == "system_prompt":
                system_parts.append(_system_prompt_text(data))
                continue
            value, parse_problems = _parse_json_blob(data, self.path, item)
            problems.extend(parse_problems)
            if parse_problems:
                continue
            if kind == "input_payload":
                payloads.append(value)
            else:
                _add_context_item(req, kind, value)
        req.system_prompt = "\n\n".join(system_parts) if system_parts else None
        payload: Any = payloads[0] if len(payloads) == 1 else (payloads if payloads else None)
        req.input_payload_refs = payload
        images, restored, image_problems, rejected = self._restore_images(payload, media_refs)
        problems.extend(image_problems)
        req.images = images
        req.rejected_images = rejected
        req.input_payload = restored
        return req, problems

    def _restore_images(
        self, payload: Any, media_refs: list[ArtifactRef]
    ) -> tuple[list[ArchivedImage], Any, list[Problem], list[ArchivedImage]]:
        problems: list[Problem] = []
        images: list[ArchivedImage] = []
        by_sha: dict[str, ArtifactRef] = {r.sha256.lower(): r for r in media_refs if isinstance(r.sha256, str)}
        loaded: dict[str, ArchivedImage | None] = {}
        rejected: list[ArchivedImage] = []

        def get(sha: str, ref: ArtifactRef | None) -> ArchivedImage | None:
            key = sha.lower()
            if key not in loaded:
                img, probs = self.load_image(key, ref or by_sha.get(key))
                problems.extend(probs)
                if img is not None and not img.verified:
                    # never restore bytes that do not match their hash into a request
                    rejected.append(img)
                    img = None
                loaded[key] = img
            return loaded[key]

        def walk(node: Any, depth: int = 0) -> Any:
            if depth > 64:
                return node
            if isinstance(node, dict):
                sha = image_ref_sha(node)
                if sha is not None:
                    img = get(sha, None)
                    if img is None:
                        return node
                    images.append(img)
                    return {"type": "image_url", "image_url": {"url": img.data_url()}}
                return {k: walk(v, depth + 1) for k, v in node.items()}
            if isinstance(node, list):
                return [walk(v, depth + 1) for v in node]
            return node

        restored = walk(payload)
        if not images:
            # no references inside the payload: fall back to the media list, in order
            for ref in media_refs:
                if isinstance(ref.sha256, str) or ref.path:
                    img = get(ref.sha256 or "", ref) if ref.sha256 else self.load_image(None, ref)[0]
                    if img is not None:
                        images.append(img)
        return images, restored, problems, rejected


def image_ref_sha(node: dict[str, Any]) -> str | None:
    """The sha of an ``image_ref`` part (convention in the module docstring), else None."""
    kind = node.get("type")
    if isinstance(kind, str) and kind in IMAGE_REF_TYPES:
        sha = node.get("sha256") or node.get("sha")
        if isinstance(sha, str) and _SHA_RE.match(sha.lower()):
            return sha
    return None


def _decode_text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _parse_json_blob(data: bytes, store: Path, item: ContextItem) -> tuple[Any, list[Problem]]:
    try:
        return orjson.loads(data), []
    except orjson.JSONDecodeError as exc:
        where = str(store / (item.artifact.path if item.artifact and item.artifact.path else "artifacts"))
        return None, [Problem(code=ProblemCode.JSON_INVALID, path=where, message=f"{item.kind} blob is not JSON: {exc}")]


def request_from_policy_input(
    policy_input: Any, *, store: RuntimeStore | None = None, request_id: str | None = None
) -> tuple[ArchivedRequest | None, list[Problem]]:
    """Fallback when there is no archive: build the request from a step's
    ``metadata.policy_input`` ``{system_instruction, input_payload, tools, response_format}``.
    ``image_ref`` parts are restored when a ``store`` is given and holds the blobs."""
    if not isinstance(policy_input, dict):
        return None, [Problem(code=ProblemCode.MISSING_ARTIFACT, path="metadata.policy_input", message="step has no policy_input object")]
    system = policy_input.get("system_instruction", policy_input.get("system_prompt"))
    if not isinstance(system, str) and system is not None:
        system = orjson.dumps(system).decode("utf-8", "replace")
    tools = policy_input.get("tools")
    if tools is None:
        tools = policy_input.get("tool_schemas")
    gen = policy_input.get("generation_config")
    req = ArchivedRequest(
        request_id=request_id,
        store_path=store.path if store is not None else None,
        system_prompt=system,
        input_payload_refs=policy_input.get("input_payload"),
        tool_schemas=list(tools) if isinstance(tools, list) else ([tools] if isinstance(tools, dict) else []),
        response_format=policy_input.get("response_format"),
        generation_config=dict(gen) if isinstance(gen, dict) else {},
        source="policy_input",
    )
    problems: list[Problem] = []
    if store is not None:
        images, restored, problems, rejected = store._restore_images(req.input_payload_refs, [])
        req.images = images
        req.rejected_images = rejected
        req.input_payload = restored
    else:
        req.input_payload = req.input_payload_refs
    return req, problems


__all__ = [
    "ArchivedImage",
    "ArchivedRequest",
    "check_regular_file",
    "RuntimeStore",
    "image_ref_sha",
    "image_size",
    "request_from_policy_input",
    "sniff_mime",
]
