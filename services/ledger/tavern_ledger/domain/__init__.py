"""The ledger's pure rules: vocabulary, gates, eligibility, extraction, composer (no IO)."""
