"""Pure rules of the stores: request shapes, scopes, caps, revisions, ranking, rate limits."""
