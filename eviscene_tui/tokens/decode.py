"""Decoding token ids, best available source first.

1. a local ``tokenizer.json`` through the ``tokenizers`` package
   (``--tokenizer PATH``, or the serving profile's ``engine_model_path`` folder);
2. the policy server's ``POST /detokenize`` (one id per request, requests issued in
   concurrent batches, results cached) with special tokens from ``GET /tokenizer_info``;
3. raw ids.

Every decoder says which source it is (:attr:`TokenDecoder.source`,
:attr:`TokenDecoder.label`). Per-token pieces are decoded one id at a time: a
byte-level piece may be a partial UTF-8 sequence, so its bytes are decoded with
``errors="replace"`` and the result passes :func:`safe_text` (pieces are display
strings; raw ids stay the ground truth).

No Textual import here (services layer).
"""

from __future__ import annotations

import asyncio
import copy
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx
import orjson
from tokenizers import Tokenizer

from eviscene_tui.artifacts.fileio import LIMITS, read_regular
from eviscene_tui.safe_text import safe_text
from eviscene_tui.tokens import vision
from eviscene_tui.tokens.bytelevel import BYTE_DECODER
from eviscene_tui.tokens.vision import VisionIds


class DecodeSource(StrEnum):
    TOKENIZER = "tokenizer"
    SERVER = "server"
    RAW = "raw"


@dataclass(frozen=True)
class SpecialToken:
    id: int
    content: str
    special: bool  # the tokenizer's ``special`` flag (``<think>`` is an added token with special=False)


_FAILED = object()  # a /tokenizer_info or /detokenize call that gave no JSON body


def byte_level_to_bytes(token: str) -> bytes:
    out = bytearray()
    for ch in token:
        b = BYTE_DECODER.get(ch)
        if b is None:
            out += ch.encode("utf-8")
        else:
            out.append(b)
    return bytes(out)


class TokenDecoder:
    """Base: raw ids. Subclasses fill :meth:`_piece` (sync) and may need :meth:`fetch`."""

    source: DecodeSource = DecodeSource.RAW

    def __init__(self, *, label: str = "raw ids (no tokenizer and no server available)") -> None:
        self.label = label
        self.specials: dict[int, SpecialToken] = {}
        self.vision: VisionIds | None = None
        self.notes: list[str] = []
        self._cache: dict[int, str] = {}

    # ---- pieces

    def special_name(self, token_id: int) -> str | None:
        """Display name of an added/special token (tokenizer or server text: sanitised)."""
        sp = self.specials.get(token_id)
        if sp is not None:
            return safe_text(sp.content, single_line=True)
        if self.vision is not None:
            return self.vision.name_of(token_id)
        return None

    def piece(self, token_id: int) -> str | None:
        """Display piece for one id (already safe_text'ed); None while a remote fetch is pending."""
        got = self._cache.get(token_id)
        if got is not None:
            return got
        name = self.special_name(token_id)
        if name is not None:
            text = safe_text(name)
        else:
            raw = self._piece(token_id)
            if raw is None:
                return None
            text = raw
        self._cache[token_id] = text
        return text

    def _piece(self, token_id: int) -> str | None:
        return f"#{token_id}"

    def piece_bytes(self, token_id: int) -> bytes | None:
        """The raw bytes one id stands for (not display-escaped), to look text up across
        token boundaries; special tokens as their content. None when this source cannot
        say (raw ids, or a remote piece not fetched yet)."""
        sp = self.specials.get(token_id)
        if sp is not None:
            return sp.content.encode("utf-8")
        if self.vision is not None:
            name = self.vision.name_of(token_id)
            if name is not None:
                return name.encode("utf-8")
        return self._piece_bytes(token_id)

    def _piece_bytes(self, token_id: int) -> bytes | None:
        return None

    def pending(self, ids: Iterable[int]) -> list[int]:
        """Ids whose piece needs a fetch (remote sources only)."""
        return []

    async def fetch(self, ids: Iterable[int]) -> int:
        """Fetch pieces for ``ids``; returns how many were added to the cache."""
        return 0

    def decode_span(self, ids: Sequence[int]) -> str | None:
        """The text of a whole span (sync sources); None when unavailable synchronously."""
        parts = [self.piece(i) for i in ids]
        if any(p is None for p in parts):
            return None
        return "".join(p for p in parts if p is not None)

    async def decode_span_async(self, ids: Sequence[int]) -> str:
        got = self.decode_span(ids)
        if got is not None:
            return got
        await self.fetch(ids)
        return "".join(self.piece(i) or f"#{i}" for i in ids)

    async def aclose(self) -> None:
        return None


class RawDecoder(TokenDecoder):
    source = DecodeSource.RAW

    def decode_span(self, ids: Sequence[int]) -> str | None:
        return " ".join(f"#{i}" for i in ids)


_LOADED: dict[tuple[str, int, int], "LocalTokenizerDecoder"] = {}
_LOADED_LOCK = threading.Lock()


class LocalTokenizerDecoder(TokenDecoder):
    """``tokenizer.json`` through the ``tokenizers`` package."""

    source = DecodeSource.TOKENIZER

    def __init__(self, tokenizer_json: bytes | str, *, path: str) -> None:
        super().__init__(label=f"tokenizer.json ({path})")

        text = tokenizer_json.decode("utf-8") if isinstance(tokenizer_json, bytes) else tokenizer_json
        doc = orjson.loads(text)
        self.path = path
        self._tok = Tokenizer.from_str(text)
        dec = doc.get("decoder") if isinstance(doc, dict) else None
        self._byte_level = _has_byte_level(dec) or _has_byte_level(doc.get("pre_tokenizer") if isinstance(doc, dict) else None)
        added: dict[int, str] = {}
        for row in (doc.get("added_tokens") or []) if isinstance(doc, dict) else []:
            if isinstance(row, dict) and isinstance(row.get("id"), int) and isinstance(row.get("content"), str):
                self.specials[row["id"]] = SpecialToken(row["id"], row["content"], bool(row.get("special", False)))
                added[row["id"]] = row["content"]
        self.vision = vision.from_added_tokens(added, "tokenizer.json added tokens")
        self._bytes: dict[int, bytes] = {}

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> "LocalTokenizerDecoder":
        """The decoder of a ``tokenizer.json`` (or a folder holding one).

        Parsing a real vocabulary is slow (a noticeable pause), so the parsed tokenizer (and the pieces
        decoded so far) are kept per file, keyed by path, size and mtime: opening the
        inspector again, or on the next case of the same model, does not parse it again.
        Each call returns its own decoder object (its ``notes`` are per resolution)."""
        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        st = p.stat()
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        with _LOADED_LOCK:
            base = _LOADED.get(key)
        if base is None:
            base = cls(read_regular(p, limit=LIMITS["tokenizer"]), path=str(p))
            if base.vision is None:
                got = vision.from_model_dir(p.parent)
                if got:
                    base.vision = got
            with _LOADED_LOCK:
                _LOADED.clear()  # one vocabulary at a time: a real one holds ~100 MB
                _LOADED[key] = base
        return base._twin()

    @classmethod
    def cached(cls, path: str | os.PathLike[str]) -> "LocalTokenizerDecoder | None":
        """The decoder of ``path`` when that version of the file was parsed already, else None
        (a stat, never a parse)."""
        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        try:
            st = p.stat()
            key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        except OSError:
            return None
        with _LOADED_LOCK:
            base = _LOADED.get(key)
        return base._twin() if base is not None else None

    def _twin(self) -> "LocalTokenizerDecoder":
        """A decoder sharing this one's tokenizer and piece caches, with its own notes."""
        twin = copy.copy(self)
        twin.notes = []
        return twin

    def _piece(self, token_id: int) -> str | None:
        if token_id < 0:
            return f"⟨invalid id {token_id}⟩"
        if self._byte_level:
            tok = self._tok.id_to_token(token_id)
            if tok is None:
                return f"⟨unknown id {token_id}⟩"
            return safe_text(byte_level_to_bytes(tok).decode("utf-8", errors="replace"))
        try:
            return safe_text(self._tok.decode([token_id], skip_special_tokens=False))
        except Exception:  # noqa: BLE001 - the tokenizer library's own errors: shown as an unknown id
            return f"⟨unknown id {token_id}⟩"

    def _piece_bytes(self, token_id: int) -> bytes | None:
        got = self._bytes.get(token_id)
        if got is not None:
            return got
        if token_id < 0:
            return None
        if self._byte_level:
            tok = self._tok.id_to_token(token_id)
            got = byte_level_to_bytes(tok) if tok is not None else None
        else:
            try:
                got = self._tok.decode([token_id], skip_special_tokens=False).encode("utf-8")
            except Exception:  # noqa: BLE001 - the tokenizer library's own errors: no bytes known for the id
                got = None
        if got is not None:
            self._bytes[token_id] = got
        return got

    def decode_span(self, ids: Sequence[int]) -> str | None:
        try:
            return safe_text(self._tok.decode([i for i in ids if i >= 0], skip_special_tokens=False))
        except Exception:  # noqa: BLE001 - the tokenizer library's own errors: the raw-id rendering is shown
            return super().decode_span(ids)


def _has_byte_level(node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    if node.get("type") == "ByteLevel":
        return True
    for key in ("decoders", "pretokenizers"):
        for sub in node.get(key) or []:
            if _has_byte_level(sub):
                return True
    return False


def server_root(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p`` (``/tokenize`` etc. have no ``/v1`` prefix)."""
    url = base_url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


class ServerDecoder(TokenDecoder):
    """The policy server's ``/detokenize`` with special tokens from ``/tokenizer_info``."""

    source = DecodeSource.SERVER

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 10.0,
        client: Any = None,
    ) -> None:
        root = server_root(base_url)
        super().__init__(label=f"server /detokenize ({root})")

        self.root = root
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.AsyncClient(
            trust_env=False, timeout=httpx.Timeout(timeout, connect=3.0), headers=headers
        )
        self._own_client = client is None
        self._sem = asyncio.Semaphore(concurrency)
        self._failed: set[int] = set()
        self._raw: dict[int, str] = {}  # server text per id, before display escaping
        self.info: dict[str, Any] | None = None
        self.errors: list[str] = []
        self.requests = 0

    def _json_of(self, resp: Any, where: str) -> Any:
        """The parsed body of a 200 response; otherwise an error noted and :data:`_FAILED`."""
        if resp.status_code != 200:
            self.errors.append(f"{where}: HTTP {resp.status_code}")
            return _FAILED
        try:
            return orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            self.errors.append(f"{where}: invalid JSON")
            return _FAILED

    async def load_info(self) -> bool:
        """GET /tokenizer_info -> special tokens and vision ids. False when unavailable."""
        try:
            resp = await self._client.get(f"{self.root}/tokenizer_info")
        except Exception as exc:  # noqa: BLE001 - httpx errors (connect, timeout, protocol) are listed in errors
            self.errors.append(f"/tokenizer_info: {type(exc).__name__}")
            return False
        info = self._json_of(resp, "/tokenizer_info")
        if info is _FAILED:
            return False
        if not isinstance(info, dict):
            self.errors.append("/tokenizer_info: not an object")
            return False
        self.info = info
        added = info.get("added_tokens_decoder")
        if isinstance(added, Mapping):
            for key, row in added.items():
                try:
                    tid = int(key)
                except (TypeError, ValueError):
                    continue
                if isinstance(row, Mapping) and isinstance(row.get("content"), str):
                    self.specials[tid] = SpecialToken(tid, row["content"], bool(row.get("special", False)))
        self.vision = vision.from_tokenizer_info(info)
        return True

    async def _detok(self, ids: list[int]) -> str | None:
        body: dict[str, Any] = {"tokens": ids}
        if self.model:
            body["model"] = self.model
        async with self._sem:
            self.requests += 1
            try:
                resp = await self._client.post(f"{self.root}/detokenize", content=orjson.dumps(body),
                                               headers={"content-type": "application/json"})
            except Exception as exc:  # noqa: BLE001 - listed in errors
                self.errors.append(f"/detokenize: {type(exc).__name__}")
                return None
        doc = self._json_of(resp, "/detokenize")
        text = doc.get("prompt") if isinstance(doc, dict) else None
        return text if isinstance(text, str) else None

    async def probe(self) -> bool:
        """One tiny /detokenize call: is the endpoint there?"""
        return (await self._detok([0])) is not None

    def pending(self, ids: Iterable[int]) -> list[int]:
        out = []
        seen: set[int] = set()
        for i in ids:
            if i in seen or i in self._cache or i in self._failed or self.special_name(i) is not None:
                continue
            seen.add(i)
            out.append(i)
        return out

    async def fetch(self, ids: Iterable[int]) -> int:
        todo = self.pending(ids)
        if not todo:
            return 0
        results = await asyncio.gather(*(self._detok([i]) for i in todo))
        added = 0
        for tid, text in zip(todo, results):
            if text is None:
                self._failed.add(tid)
                self._cache[tid] = f"#{tid}"
            else:
                # the server decodes with errors="replace" already; a partial byte shows as U+FFFD
                self._raw[tid] = text
                self._cache[tid] = safe_text(text)
            added += 1
        return added

    def _piece(self, token_id: int) -> str | None:
        return None  # not cached yet: fetch first

    def _piece_bytes(self, token_id: int) -> bytes | None:
        text = self._raw.get(token_id)
        return text.encode("utf-8") if text is not None else None

    async def decode_span_async(self, ids: Sequence[int]) -> str:
        text = await self._detok(list(ids))
        if text is not None:
            return safe_text(text)
        return await super().decode_span_async(ids)

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()


# --------------------------------------------------------------------------- resolution
def _engine_path_from_profile(profile: Any) -> str | None:
    if profile is None:
        return None
    if isinstance(profile, (str, os.PathLike)):
        try:
            data = orjson.loads(read_regular(profile, limit=LIMITS["config"]))
        except (OSError, orjson.JSONDecodeError):
            return None
        profile = data
    get = profile.get if isinstance(profile, Mapping) else (lambda k, d=None: getattr(profile, k, d))
    for key in ("engine_model_path", "model_path"):
        value = get(key)
        if isinstance(value, str) and value:
            return value
    return None


def find_tokenizer_json(
    tokenizer: str | os.PathLike[str] | None = None,
    profile: Any = None,
    *,
    bases: Sequence[str | os.PathLike[str]] = (),
    fallback_dirs: Sequence[str | os.PathLike[str]] = (),
) -> tuple[Path | None, list[str]]:
    """Locate a local tokenizer.json: ``--tokenizer`` first, then the profile's engine_model_path
    (a relative engine path is tried against each of ``bases``), then ``fallback_dirs``
    (e.g. the opened folder, so a bundled demo tokenizer is found)."""
    notes: list[str] = []
    if tokenizer:
        p = Path(tokenizer)
        cand = p / "tokenizer.json" if p.is_dir() else p
        if cand.is_file():
            return cand, notes
        notes.append(f"--tokenizer {p}: no tokenizer.json there")
    engine = _engine_path_from_profile(profile)
    if engine:
        tries = [Path(engine)]
        if not Path(engine).is_absolute():
            tries += [Path(b) / engine for b in bases]
        for base in tries:
            cand = base / "tokenizer.json" if not base.name.endswith(".json") else base
            if cand.is_file():
                return cand, notes
        notes.append(f"serving profile engine_model_path {engine}: no tokenizer.json there")
    for d in fallback_dirs:
        cand = Path(d) / "tokenizer.json"
        if cand.is_file():
            return cand, notes
    return None, notes


def cached_decoder(
    *,
    tokenizer: str | os.PathLike[str] | None = None,
    profile: Any = None,
    bases: Sequence[str | os.PathLike[str]] = (),
    fallback_dirs: Sequence[str | os.PathLike[str]] = (),
) -> TokenDecoder | None:
    """What :func:`resolve_decoder` would pick when that is a local ``tokenizer.json``
    parsed already (file stats only); None otherwise (resolve it then)."""
    path, notes = find_tokenizer_json(tokenizer, profile, bases=bases, fallback_dirs=fallback_dirs)
    if path is None:
        return None
    dec = LocalTokenizerDecoder.cached(path)
    if dec is not None:
        dec.notes.extend(notes)
    return dec


async def resolve_decoder(
    *,
    tokenizer: str | os.PathLike[str] | None = None,
    profile: Any = None,
    policy_url: str | None = None,
    policy_model: str | None = None,
    api_key: str | None = None,
    client: Any = None,
    bases: Sequence[str | os.PathLike[str]] = (),
    fallback_dirs: Sequence[str | os.PathLike[str]] = (),
) -> TokenDecoder:
    """The best available decoder; its ``notes`` say why earlier sources were skipped."""
    path, notes = find_tokenizer_json(tokenizer, profile, bases=bases, fallback_dirs=fallback_dirs)
    if path is not None:
        try:
            # in a thread: parsing a real vocabulary must not stall the event loop
            dec: TokenDecoder = await asyncio.to_thread(LocalTokenizerDecoder.from_path, path)
            dec.notes.extend(notes)
            return dec
        except Exception as exc:  # noqa: BLE001 - a tokenizer that cannot load is noted; the next candidate is tried
            notes.append(f"{path}: cannot load ({type(exc).__name__}: {safe_text(str(exc), single_line=True, limit=120)})")
    url = policy_url
    if url is None and profile is not None:
        if isinstance(profile, Mapping):
            url = profile.get("base_url")
        elif isinstance(profile, (str, os.PathLike)):
            try:
                doc = orjson.loads(read_regular(profile, limit=LIMITS["config"]))
                url = doc.get("base_url") if isinstance(doc, dict) else None
            except (OSError, orjson.JSONDecodeError):
                url = None
        else:
            url = getattr(profile, "base_url", None)
    if isinstance(url, str) and url:
        if api_key is None:
            api_key = os.environ.get("EVISCENE_POLICY_API_KEY")
        server = ServerDecoder(url, model=policy_model, api_key=api_key, client=client)
        has_info = await server.load_info()
        if await server.probe():
            if not has_info:
                server.notes.append("special tokens unlabelled: /tokenizer_info unavailable")
            server.notes[:0] = notes
            return server
        notes.append(f"policy server {server.root}: /detokenize unavailable ({'; '.join(server.errors) or 'no answer'})")
        await server.aclose()
    else:
        notes.append("no policy server configured")
    raw = RawDecoder()
    raw.notes.extend(notes)
    return raw
