"""Pre-step recall: the recaller (`recaller`) and its reads of evidence, observations and rules
(`queries`); a session's scope comes from `tavern_ledger.scopes.evidence`."""
