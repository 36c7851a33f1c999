-- Owners (principals): who each session belongs to, and who each scope it names belongs to.
-- Everything stored before owners were recorded belongs to the default owner `local`.

ALTER TABLE ledger.session_binding ADD COLUMN owner text NOT NULL DEFAULT 'local';
ALTER TABLE ledger.ingest_session ADD COLUMN owner text NOT NULL DEFAULT 'local';

CREATE TABLE ledger.scope_owner (
  scope_id   text PRIMARY KEY,
  owner      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ledger.scope_owner IS
  'The owner of a scope (chat, character, session): the first session to name it claims it; '
  'a later session of another owner is refused that scope.';

INSERT INTO ledger.scope_owner (scope_id, owner)
SELECT DISTINCT s, 'local' FROM (
  SELECT chat_id AS s FROM ledger.session_binding
  UNION SELECT session_id FROM ledger.session_binding
  UNION SELECT character_id FROM ledger.session_binding WHERE character_id IS NOT NULL
  UNION SELECT chat_id FROM ledger.ingest_session
  UNION SELECT session_id FROM ledger.ingest_session
  UNION SELECT scope_id FROM ledger.ingest_session WHERE scope_id IS NOT NULL
  UNION SELECT scope_id FROM ledger.evidence
  UNION SELECT scope_id FROM ledger.observation
  UNION SELECT scope_id FROM ledger.memory
) AS known
WHERE s <> 'global'
ON CONFLICT (scope_id) DO NOTHING;
