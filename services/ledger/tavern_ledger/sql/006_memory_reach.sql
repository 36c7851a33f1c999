-- Memory reach: a session's evidence lives in the scope its binding's reach derives (its chat,
-- its character's or its agent's). Sessions stored before this keep the chat scope they were
-- ingested into, so nothing already remembered moves.
ALTER TABLE ledger.ingest_session ADD COLUMN scope_id text;
UPDATE ledger.ingest_session SET scope_id = chat_id;
ALTER TABLE ledger.session_binding ADD COLUMN memory_reach text
    CHECK (memory_reach IN ('chat', 'character', 'agent'));
UPDATE ledger.session_binding SET memory_reach = 'chat';

-- Claims: a person's messages are filed as statements (`user_fact`) or directives (`style`,
-- `user_preference`) by tavern_ledger.domain.claims; rows stored before are reclassified once,
-- at the ledger's start, when the stored version is older.
ALTER TABLE ledger.lexicon ADD COLUMN claims_version integer NOT NULL DEFAULT 0;
