"""Decoding through a tokenizer built in the test (tiny.py), by object and by path."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from eviscene_tui.scaffold import tiny
from eviscene_tui.tokens.decode import (
    DecodeSource,
    LocalTokenizerDecoder,
    RawDecoder,
    byte_level_to_bytes,
    find_tokenizer_json,
    resolve_decoder,
    server_root,
)


@pytest.fixture(params=["qwen3_5", "qwen2_5_vl"])
def family(request):
    return request.param


def _write_tokenizer(dir_: Path, family: str, config: dict | None = None) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / "tokenizer.json").write_text(tiny.tiny_tokenizer_json(family), encoding="utf-8")
    if config is not None:
        (dir_ / "config.json").write_bytes(orjson.dumps(config))
    return dir_ / "tokenizer.json"


def test_local_pieces_roundtrip(tmp_path: Path, family: str):
    path = _write_tokenizer(tmp_path / "tok", family)
    dec = LocalTokenizerDecoder.from_path(path)
    assert dec.source == DecodeSource.TOKENIZER and str(path) in dec.label
    text = "The image search result was not a match"
    ids = tiny.encode(text, family)
    pieces = [dec.piece(i) for i in ids]
    assert "".join(pieces) == text
    assert dec.decode_span(ids) == text
    # whole-word merges exist, so it is not one token per byte
    assert len(ids) < len(text)


def test_specials_labelled_and_vision_from_added_tokens(tmp_path: Path, family: str):
    dec = LocalTokenizerDecoder.from_path(_write_tokenizer(tmp_path / "tok", family))
    im_start = tiny.special_id("<|im_start|>", family)
    pad = tiny.special_id("<|image_pad|>", family)
    think = tiny.special_id("<think>", family)
    assert dec.special_name(im_start) == "<|im_start|>"
    assert dec.piece(pad) == "<|image_pad|>"
    assert dec.specials[think].special is False  # added token, not special
    assert dec.vision is not None and dec.vision.family == family and dec.vision.image_pad == pad
    assert "added tokens" in dec.vision.basis


def test_partial_utf8_pieces_are_replaced_and_safe(tmp_path: Path):
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="mem")
    ids = tiny.encode("é🙂")  # multi-byte chars: one token per byte
    assert len(ids) == 2 + 4
    pieces = [dec.piece(i) for i in ids]
    assert all("\ufffd" in p for p in pieces)
    # a control byte is shown as a control picture, never raw ESC
    esc = tiny.encode("\x1b")
    assert dec.piece(esc[0]) == "\u241b"
    assert dec.decode_span(tiny.encode("a\x1b[2Jb")) == "a\u241b[2Jb"


def test_unknown_and_negative_ids(tmp_path: Path):
    dec = LocalTokenizerDecoder(tiny.tiny_tokenizer_json(), path="mem")
    assert "unknown" in dec.piece(999_999_999)
    assert "invalid" in dec.piece(-1)


def test_byte_level_inverse():
    assert byte_level_to_bytes("Ġthe") == b" the"
    assert byte_level_to_bytes("Ċ") == b"\n"


def test_find_tokenizer_order(tmp_path: Path):
    a = _write_tokenizer(tmp_path / "a", "qwen3_5")
    b = _write_tokenizer(tmp_path / "engine", "qwen2_5_vl")
    prof = {"engine_model_path": str(tmp_path / "engine"), "model_path": "/nope"}
    assert find_tokenizer_json(tmp_path / "a", prof)[0] == a
    assert find_tokenizer_json(None, prof)[0] == b
    got, notes = find_tokenizer_json(tmp_path / "missing", {"engine_model_path": "/does/not/exist"})
    assert got is None and len(notes) == 2
    # relative engine path against a base; profile given as a file
    pfile = tmp_path / "profile.json"
    pfile.write_bytes(orjson.dumps({"engine_model_path": "engine"}))
    assert find_tokenizer_json(None, pfile, bases=[tmp_path])[0] == b


async def test_resolve_prefers_tokenizer_then_raw(tmp_path: Path):
    _write_tokenizer(tmp_path / "engine", "qwen2_5_vl")
    dec = await resolve_decoder(profile={"engine_model_path": str(tmp_path / "engine")})
    assert dec.source == DecodeSource.TOKENIZER and dec.vision.family == "qwen2_5_vl"
    raw = await resolve_decoder()
    assert isinstance(raw, RawDecoder) and raw.source == DecodeSource.RAW
    assert raw.piece(42) == "#42"
    assert any("no policy server" in n for n in raw.notes)


async def test_resolve_unreachable_server_falls_back_to_raw():
    dec = await resolve_decoder(policy_url="http://127.0.0.1:9/v1")
    assert dec.source == DecodeSource.RAW
    assert any("/detokenize unavailable" in n for n in dec.notes)


def test_server_root():
    assert server_root("http://h:1/v1/") == "http://h:1"
    assert server_root("http://h:1") == "http://h:1"


def test_vision_from_config_dir(tmp_path: Path):
    from eviscene_tui.tokens import vision

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_bytes(orjson.dumps({"model_type": "qwen3_vl"}))
    v = vision.from_model_dir(tmp_path / "m")
    assert v.family == "qwen2_5_vl" and v.image_pad == 151655 and "model_type=qwen3_vl" in v.basis
    (tmp_path / "m" / "config.json").write_bytes(orjson.dumps({"model_type": "x", "image_token_id": 248056, "vision_start_token_id": 248053, "vision_end_token_id": 248054}))
    v = vision.from_model_dir(tmp_path / "m")
    assert v.family == "qwen3_5" and "token ids" in v.basis
    # the model *name* never decides
    assert vision.from_config({"_name_or_path": "Qwen/Qwen3.5-9B"}) is None
    assert vision.from_tokenizer_info(tiny.tokenizer_config("qwen2_5_vl")).family == "qwen2_5_vl"


def test_hostile_added_token_is_sanitised():
    doc = orjson.loads(tiny.tiny_tokenizer_json())
    hostile = "\x1b]0;PWNED\x07[@click=app.quit]x[/]\u202e"
    doc["added_tokens"].append({"id": 300000, "content": hostile, "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": True})
    doc["model"]["vocab"][hostile] = 300000
    dec = LocalTokenizerDecoder(orjson.dumps(doc), path="hostile")
    name = dec.special_name(300000)
    assert "\x1b" not in name and "\x07" not in name and "\u202e" not in name
    assert dec.piece(300000) == name


def test_tokenizer_file_is_parsed_once_per_version(tmp_path):
    """Opening the inspector again (or on the next case) reuses the parsed vocabulary; a
    changed file is parsed again; each resolution has its own notes."""
    import os

    from eviscene_tui.scaffold import tiny
    from eviscene_tui.tokens.decode import LocalTokenizerDecoder

    path = tmp_path / "tokenizer.json"
    path.write_text(tiny.tiny_tokenizer_json(), encoding="utf-8")
    a = LocalTokenizerDecoder.from_path(tmp_path)
    a.notes.append("only for a")
    a.piece(300)
    b = LocalTokenizerDecoder.from_path(path)
    assert a is not b and a._tok is b._tok and b.notes == [] and 300 in b._cache
    st = path.stat()
    path.write_text(tiny.tiny_tokenizer_json("qwen2_5_vl"), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    c = LocalTokenizerDecoder.from_path(path)
    assert c._tok is not a._tok and c.vision.image_pad == tiny.special_id("<|image_pad|>", "qwen2_5_vl")


def test_vision_family_guessed_from_framing_without_scanning_everything():
    from eviscene_tui.scaffold import tiny
    from eviscene_tui.tokens.vision import guess_from_ids

    def framed(family: str, times: int) -> list[int]:
        return [tiny.special_id("<|vision_start|>", family), tiny.special_id("<|image_pad|>", family)] * times

    assert guess_from_ids(tiny.encode("x") + framed("qwen3_5", 5)).family == "qwen3_5"
    assert guess_from_ids(framed("qwen2_5_vl", 1)).family == "qwen2_5_vl"
    assert guess_from_ids(framed("qwen3_5", 1) + framed("qwen2_5_vl", 2)).family == "qwen2_5_vl"
    assert guess_from_ids([tiny.special_id("<|vision_start|>"), 5]) is None
    assert guess_from_ids(iter(framed("qwen3_5", 2))).family == "qwen3_5"
