"""The single display boundary for untrusted text.

Every string that comes from run files, servers or tokenizers passes through
:func:`safe_text` before it reaches the terminal. Raw values stay raw in the
models; only the displayed form is neutralised.

Rules (see shared/reference/textual-practice.md §D):
- C0 controls except ``\\n`` and ``\\t`` become Unicode control pictures
  (``\\x1b`` -> ``␛``), DEL becomes ``␡``;
- C1 controls (U+0080..U+009F) become ``\\x..`` escapes;
- bidi embedding/override/isolate controls and every other non-printable
  character become ``\\u....`` escapes;
- lone surrogates (from bad decodes) become U+FFFD.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import orjson

_BIDI = frozenset(
    [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]
)


@lru_cache(maxsize=4096)
def _escape_char(ch: str) -> str:
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if 0x80 <= code <= 0x9F:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    if code in _BIDI:
        return f"\\u{code:04x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _is_safe(ch: str) -> bool:
    if ch == "\n" or ch == "\t":
        return True
    if ord(ch) in _BIDI:
        return False
    # isprintable() is False for C0, DEL, C1, separators other than space,
    # format characters (Cf, which covers the bidi controls) and unassigned code points.
    return ch.isprintable()


def shown_as_is(text: str) -> bool:
    """Whether every character of ``text`` is shown as itself (``_is_safe``), at C speed:
    printable, newlines and tabs. No bidi control is printable (a test pins it: they are
    format characters), so a printable text holds none."""
    if text.isprintable():
        return True
    if "\n" in text or "\t" in text:
        return text.replace("\n", "").replace("\t", "").isprintable()
    return False


def safe_text(value: object, *, single_line: bool = False, limit: int | None = None) -> str:
    """Return ``value`` as a string that is safe to hand to the terminal.

    ``single_line`` also replaces newlines and tabs with visible pictures (for
    table cells and one-line previews). ``limit`` truncates the *result* to that
    many characters with an ellipsis.
    """
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit * 4:
        text = text[: limit * 4]
    if shown_as_is(text):  # (a page of text: no loop over its characters)
        out = text
    else:
        out = "".join(ch if _is_safe(ch) else _escape_char(ch) for ch in text)
    if single_line:
        out = out.replace("\n", "\u23ce").replace("\t", " ")
    if limit is not None and len(out) > limit:
        out = out[: max(0, limit - 1)] + "\u2026"
    return out


def safe_bytes(data: bytes) -> str:
    """Decode bytes (e.g. a byte-level token piece) with replacement, then sanitise."""
    return safe_text(data.decode("utf-8", errors="replace"))


# --------------------------------------------------------------------------- JSON for a terminal
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@lru_cache(maxsize=4096)
def _json_escape(ch: str) -> str:
    """``ch`` itself when a terminal shows it as itself, else its JSON ``\\u`` escape
    (a surrogate pair above U+FFFF): the same JSON value, never a control."""
    if _is_safe(ch):
        return ch
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def terminal_json(value: Any, *, indent: bool = False, sort_keys: bool = False) -> bytes:
    """``value`` as JSON that is safe to print to a terminal and still lossless.

    orjson escapes the C0 controls but writes every other character raw; a string from a
    run file, a server or a tokenizer can hold C1 controls (U+0080..U+009F, some of which
    terminals act on), line and paragraph separators (U+2028, U+2029, U+0085) and bidi
    overrides that reorder what is shown. Every character :func:`safe_text` would not
    show as itself is written as a ``\\uXXXX`` escape instead: in JSON these can only
    occur inside strings, so the document stays valid and parses to the same value.
    The one JSON writer of every command's ``--json`` output."""
    option = orjson.OPT_NON_STR_KEYS
    if indent:
        option |= orjson.OPT_INDENT_2
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    data = orjson.dumps(value, option=option)
    if data.isascii():
        return data
    text = data.decode("utf-8")
    return _NON_ASCII.sub(lambda m: _json_escape(m.group()), text).encode("utf-8")


def csv_cell(value: str, *, to_terminal: bool) -> str:
    """One CSV cell as a command writes it: exactly the value when the output goes to a
    file or a pipe (a dataset pipeline reads what was recorded), through :func:`safe_text`
    when it goes to a terminal (CSV has no lossless escape for a control character)."""
    return safe_text(value) if to_terminal else value
