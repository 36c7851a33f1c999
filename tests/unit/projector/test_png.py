"""PNG chunks for cards: read, write, refuse damage."""

from __future__ import annotations

import pytest

from tavern_projector.errors import CardError
from tavern_runtime.cards import png


def test_text_chunks_round_trip_before_iend() -> None:
    image = png.with_text(png.tiny_image(2, 3), {"chara": "abc", "Comment": "x"})
    chunks = png.read_chunks(image)
    assert [c.kind for c in chunks] == [b"IHDR", b"IDAT", b"tEXt", b"tEXt", b"IEND"]
    assert png.text_chunks(chunks) == {"chara": "abc", "comment": "x"}


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_truncation_is_reported(cut: int) -> None:
    image = png.with_text(png.tiny_image(), {"chara": "abc"})
    with pytest.raises(CardError, match="truncated"):
        png.read_chunks(image[:-cut])


def test_a_bad_crc_is_reported() -> None:
    image = bytearray(png.tiny_image())
    image[20] ^= 0xFF
    with pytest.raises(CardError, match="bad CRC"):
        png.read_chunks(bytes(image))
