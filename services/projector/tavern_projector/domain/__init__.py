"""Pure rules of the projector: folds, formats, search and activation. No IO, no clock."""
