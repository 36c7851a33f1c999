-- Recall ranking: the log position of evidence that came from a session event, so that recall can
-- read the evidence right before and after a hit in its session (one index probe each side, also
-- when a whole session shares one observed time); and the version of the lexical terms the
-- postings were built with (the service rebuilds them at start when its tokeniser is newer).

ALTER TABLE ledger.evidence ADD COLUMN position integer GENERATED ALWAYS AS (
    CASE WHEN left(source_ref, 19) = '{"sessionEventId":"'
          AND length(rtrim(split_part(source_ref, ':', 3), '"}')) BETWEEN 1 AND 9
          AND translate(rtrim(split_part(source_ref, ':', 3), '"}'), '0123456789', '') = ''
         THEN rtrim(split_part(source_ref, ':', 3), '"}')::integer END
) STORED;
COMMENT ON COLUMN ledger.evidence.position IS
    'seq of the session event the row came from (from source_ref); NULL for other sources';

DROP INDEX ledger.evidence_recent_in_session;
CREATE INDEX evidence_recent_in_session
    ON ledger.evidence (scope_id, session_id, observed_at DESC, position DESC)
    WHERE state = 'active';

CREATE TABLE ledger.lexicon (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    terms_version integer NOT NULL
);
COMMENT ON TABLE ledger.lexicon IS
    'The version of tavern_ledger.domain.text.terms that built ledger.evidence_term.';
INSERT INTO ledger.lexicon (terms_version) VALUES (1);

-- Term statistics for recall's BM25 weights, as functions so that the recall statement calls
-- them only for what the service does not know yet, and its generic plan stays cheap (a counting
-- subquery in the statement made Postgres plan it anew on every call).
CREATE FUNCTION ledger.term_frequency(p_scope text, p_term text, p_cap integer)
RETURNS integer LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT count(*) FROM (
        SELECT 1 FROM ledger.evidence_term WHERE scope_id = p_scope AND term = p_term LIMIT p_cap
    ) c);
END
$$;
COMMENT ON FUNCTION ledger.term_frequency IS
    'How many postings a term has in a scope, counted up to p_cap.';

CREATE FUNCTION ledger.scope_documents(p_scope text)
RETURNS integer LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT count(*) FROM ledger.evidence WHERE scope_id = p_scope AND state = 'active');
END
$$;
COMMENT ON FUNCTION ledger.scope_documents IS 'How many active evidence rows a scope holds.';
