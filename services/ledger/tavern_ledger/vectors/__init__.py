"""The semantic channel on pgvector: evidence vectors in `ledger.evidence_vector`, written after
ingestion commits and rebuilt at start, searched by scope with cosine distance."""
