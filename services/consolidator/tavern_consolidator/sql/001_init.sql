-- The consolidator schema, owned by the consolidator service alone (watermarks, batches and candidates arrive with the consolidator issue).
CREATE SCHEMA IF NOT EXISTS consolidator;
COMMENT ON SCHEMA consolidator IS 'Owned by the consolidator service (tavern_consolidator); no other service reads or writes it.';
