"""The GPT-2 byte-level alphabet that Qwen's BPE vocabularies are written in.

Every byte 0-255 maps to one printable character (printable Latin-1 bytes map to
themselves, the rest to U+0100 onwards). :func:`byte_alphabet` is the forward map
in byte order (the tiny tokenizer's base vocabulary); :data:`BYTE_DECODER` is its
inverse (vocabulary pieces back to bytes).
"""

from __future__ import annotations


def byte_alphabet() -> list[str]:
    """The GPT-2 byte -> printable unicode mapping, in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    mapping = dict(zip(bs, cs))
    return [chr(mapping[b]) for b in range(256)]


#: printable char -> byte (the inverse of :func:`byte_alphabet`)
BYTE_DECODER: dict[str, int] = {ch: b for b, ch in enumerate(byte_alphabet())}
