-- The ledger schema, owned by the ledger service alone (evidence, observations, memory and variables arrive with the ledger issue).
CREATE SCHEMA IF NOT EXISTS ledger;
COMMENT ON SCHEMA ledger IS 'Owned by the ledger service (tavern_ledger); no other service reads or writes it.';
