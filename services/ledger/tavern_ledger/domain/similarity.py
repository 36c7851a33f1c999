"""The semantic channel's pure rules: what of a row is embedded, how a cosine distance becomes a
score, and which search a scope of a given size gets."""

from __future__ import annotations

EMBEDDED_CHARS = 2000
"""The head of a row that is embedded: the model reads a sentence or a paragraph, and a long
tool output would cost milliseconds per row for a vector no better than its opening's."""
EXACT_SCOPE_VECTORS = 5000
"""Up to this many vectors a scope is searched exactly (every distance computed: best recall,
a few milliseconds); a larger one through the HNSW graph."""


def embedded_text(content: str) -> str:
    """What the model reads of `content`: its head, whitespace folded."""
    return " ".join(content[: EMBEDDED_CHARS * 2].split())[:EMBEDDED_CHARS]


def score_of(distance: float) -> float:
    """pgvector's cosine distance (1 - cosine) as a score in [0, 1]: the cosine similarity,
    with opposite and unrelated meanings (similarity 0 or less) at 0."""
    return min(1.0, max(0.0, 1.0 - distance))


def exact_search(vectors_in_scope: int) -> bool:
    """A scope this small is searched exactly rather than through the graph."""
    return vectors_in_scope <= EXACT_SCOPE_VECTORS
