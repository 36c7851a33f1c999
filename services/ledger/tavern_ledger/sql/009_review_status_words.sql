-- Review status words: a rollback wrote `rollbackd`; acp.md's word is `rolled_back`. Rows stored
-- before are rewritten once (tavern_ledger.domain.lifecycle upcasts the old word on read too, for
-- rows that arrive later through an import).
UPDATE ledger.evidence
   SET metadata = jsonb_set(metadata, '{reviewStatus}', '"rolled_back"')
 WHERE metadata->>'reviewStatus' = 'rollbackd';
