"""The projections of the projector service, one module each (adapters over `domain`)."""
