"""Pre-step recall: the recaller (`recaller`) and its reads of evidence, observations and rules
(`queries`)."""
