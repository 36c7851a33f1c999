-- The semantic channel's vectors: one per evidence row recall may read (active or superseded),
-- made by the sentence model named in `model` (tavern_ledger.embedding.MODEL). Derived data:
-- rebuilt at start for rows that have none or were embedded by another model.
--
-- `vector` is not a trusted extension: an administrator creates it (`tavern init` / `tavern up`
-- do, as the superuser, before migrating). Without it the table cannot exist; the ledger then
-- recalls on the lexical channel alone. `ensure_evidence_vector` creates the table once the
-- extension is there, so an administrator may add it later: the ledger calls it at start.
-- The HNSW graph, apart: a rebuild of many vectors drops it and builds it again once they are
-- in (a bulk build is several times faster than as many inserts into the graph). m = 8 and
-- ef_construction = 32 halve the cost of an insert against the defaults (16, 64); the 20
-- neighbours recall asks for come out of a scope's search alike.
CREATE FUNCTION ledger.ensure_evidence_vector_graph() RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    EXECUTE 'CREATE INDEX IF NOT EXISTS evidence_vector_hnsw ON ledger.evidence_vector '
            'USING hnsw (embedding vector_cosine_ops) WITH (m = 8, ef_construction = 32)';
END
$fn$;

CREATE FUNCTION ledger.ensure_evidence_vector() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    IF to_regclass('ledger.evidence_vector') IS NOT NULL THEN
        RETURN true;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('ledger.evidence_vector'));
    IF to_regclass('ledger.evidence_vector') IS NOT NULL THEN
        RETURN true;  -- another replica made it while this one waited
    END IF;
    EXECUTE $ddl$
        CREATE TABLE ledger.evidence_vector (
            evidence_id text PRIMARY KEY REFERENCES ledger.evidence (id) ON DELETE CASCADE,
            scope_id    text NOT NULL,
            model       text NOT NULL,
            embedding   vector(512) NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now()
        )
    $ddl$;
    -- 2 KB a vector: kept in the row, not compressed out of line (an exact search reads them all)
    EXECUTE 'ALTER TABLE ledger.evidence_vector ALTER COLUMN embedding SET STORAGE PLAIN';
    -- Small scopes are searched exactly through the scope index; large ones through HNSW
    -- (ledger.ensure_evidence_vector_graph) with pgvector's iterative scan, which reads on
    -- until enough neighbours are in scope.
    EXECUTE 'CREATE INDEX evidence_vector_scope ON ledger.evidence_vector (scope_id, model)';
    PERFORM ledger.ensure_evidence_vector_graph();
    -- Redaction and quarantine end what recall may read: the vector goes in the same
    -- transaction as the state change (a deleted row takes its vector by the foreign key).
    EXECUTE $ddl$
        CREATE FUNCTION ledger.drop_evidence_vector() RETURNS trigger
        LANGUAGE plpgsql AS $trg$
        BEGIN
            DELETE FROM ledger.evidence_vector WHERE evidence_id = NEW.id;
            RETURN NULL;
        END
        $trg$
    $ddl$;
    EXECUTE $ddl$
        CREATE TRIGGER evidence_unreadable_drops_vector
        AFTER UPDATE OF state ON ledger.evidence
        FOR EACH ROW WHEN (NEW.state NOT IN ('active', 'superseded'))
        EXECUTE FUNCTION ledger.drop_evidence_vector()
    $ddl$;
    RETURN true;
END
$fn$;
COMMENT ON FUNCTION ledger.ensure_evidence_vector IS
    'Create ledger.evidence_vector when the vector extension exists; true when the table is there.';

SELECT ledger.ensure_evidence_vector();
