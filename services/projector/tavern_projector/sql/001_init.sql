-- The projector schema, owned by the projector service alone (checkpoints, the session archive and read models arrive with the projector issue).
CREATE SCHEMA IF NOT EXISTS projector;
COMMENT ON SCHEMA projector IS 'Owned by the projector service (tavern_projector); no other service reads or writes it.';
