"""PNG chunks, just enough for character cards: read and write `tEXt` chunks (zlib CRC)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from tavern_runtime.cards.errors import CardError

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Chunk:
    kind: bytes
    data: bytes


def is_png(data: bytes) -> bool:
    return data.startswith(SIGNATURE)


def read_chunks(data: bytes) -> list[Chunk]:
    """Every chunk up to IEND; a truncated file or a bad CRC raises `CardError`."""
    if not is_png(data):
        raise CardError("png", "not a PNG file (bad signature)")
    chunks, at = [], len(SIGNATURE)
    while True:
        chunk, at = _chunk_at(data, at)
        chunks.append(chunk)
        if chunk.kind == b"IEND":
            return chunks


def _chunk_at(data: bytes, at: int) -> tuple[Chunk, int]:
    if at + 8 > len(data):
        raise CardError("png", f"truncated: no IEND chunk (file ends at byte {len(data)})")
    length, kind = struct.unpack(">I4s", data[at : at + 8])
    end = at + 8 + length + 4
    if end > len(data):
        what = kind.decode("latin-1")
        raise CardError("png", f"truncated: chunk {what} at byte {at} runs past the end")
    body = data[at + 8 : at + 8 + length]
    (crc,) = struct.unpack(">I", data[end - 4 : end])
    if zlib.crc32(kind + body) != crc:
        raise CardError("png", f"chunk {kind.decode('latin-1')} at byte {at} has a bad CRC")
    return Chunk(kind, body), end


def text_chunks(chunks: list[Chunk]) -> dict[str, str]:
    """`tEXt` keyword (lower-cased) -> text; the first chunk of a keyword wins."""
    found: dict[str, str] = {}
    for chunk in chunks:
        if chunk.kind != b"tEXt" or b"\x00" not in chunk.data:
            continue
        keyword, _, value = chunk.data.partition(b"\x00")
        found.setdefault(keyword.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def encode_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data)
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def text_chunk(keyword: str, value: str) -> bytes:
    return encode_chunk(b"tEXt", keyword.encode("latin-1") + b"\x00" + value.encode("latin-1"))


def tiny_image(width: int = 1, height: int = 1, rgb: tuple[int, int, int] = (0, 0, 0)) -> bytes:
    """A valid truecolour PNG without text chunks (for generated cards)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\x00" + bytes(rgb) * width
    pixels = zlib.compress(row * height)
    return SIGNATURE + b"".join(
        (encode_chunk(b"IHDR", header), encode_chunk(b"IDAT", pixels), encode_chunk(b"IEND", b""))
    )


def with_text(image: bytes, texts: dict[str, str]) -> bytes:
    """`image` with `tEXt` chunks inserted before IEND (as SillyTavern writes cards)."""
    chunks = read_chunks(image)
    body = b"".join(encode_chunk(c.kind, c.data) for c in chunks[:-1])
    extra = b"".join(text_chunk(k, v) for k, v in texts.items())
    return SIGNATURE + body + extra + encode_chunk(b"IEND", b"")
