-- Atomic claims: a person's message is kept whole as evidence (`metadata.claim.kind` 'message')
-- and cut into claims, each a row of its own that cites the message (`metadata.claim.of`).
-- Recall reads claims (and other evidence), never whole messages, questions or small talk.

ALTER TABLE ledger.evidence
    ADD COLUMN claim_kind text GENERATED ALWAYS AS (metadata -> 'claim' ->> 'kind') STORED,
    ADD COLUMN claim_of text GENERATED ALWAYS AS (metadata -> 'claim' ->> 'of') STORED;
COMMENT ON COLUMN ledger.evidence.claim_kind IS
    'message, fact, preference, directive, question, chatter or correction; NULL: not a claim';
COMMENT ON COLUMN ledger.evidence.claim_of IS 'the evidence id of the message a claim was cut from';
CREATE INDEX evidence_claims_of ON ledger.evidence (claim_of) WHERE claim_of IS NOT NULL;

DROP INDEX ledger.evidence_recent_in_scope;
CREATE INDEX evidence_recent_in_scope ON ledger.evidence (scope_id, observed_at DESC)
    WHERE state = 'active' AND coalesce(claim_kind, '') NOT IN ('message', 'question', 'chatter');
DROP INDEX ledger.evidence_recent_in_session;
CREATE INDEX evidence_recent_in_session
    ON ledger.evidence (scope_id, session_id, observed_at DESC, position DESC)
    WHERE state = 'active' AND coalesce(claim_kind, '') NOT IN ('message', 'question', 'chatter');

-- Messages stored before claims are cut at the next start (`evidence.claimcut`).
ALTER TABLE ledger.lexicon ADD COLUMN segments_version integer NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION ledger.scope_documents(p_scope text)
RETURNS integer LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT count(*) FROM ledger.evidence WHERE scope_id = p_scope AND state = 'active'
            AND coalesce(claim_kind, '') NOT IN ('message', 'question', 'chatter'));
END
$$;
