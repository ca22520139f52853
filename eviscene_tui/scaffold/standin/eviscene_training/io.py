"""STAND-IN of ``eviscene_training.io``: the driver's JSON conventions (psd-run-format §2.1)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _sha(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_json(path: str | Path, value: Any) -> None:
    """UTF-8, indent 2, trailing newline; not atomic (as the driver's)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def load_jsonl(path: str | Path) -> list[Any]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").split("\n") if line.strip()]


def write_jsonl(path: str | Path, rows: list[Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(canonical_json(row) + b"\n" for row in rows))


class BindingChanged(ValueError):
    pass


def save_bound(path: str | Path, *, identity: Any, payload: Any) -> None:
    write_json(path, {"identity": identity, "payload": payload, "payload_sha256": _sha(payload)})


def load_bound(path: str | Path, *, identity: Any) -> Any:
    doc = load_json(path)
    if doc.get("identity") != identity or doc.get("payload_sha256") != _sha(doc.get("payload")):
        raise BindingChanged("PSD continuation checkpoint binding changed")
    return doc["payload"]
