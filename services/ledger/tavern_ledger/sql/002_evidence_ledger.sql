-- The evidence ledger (research/acp.md §2 mapped to Postgres): evidence and its lexical index,
-- observations, behaviour candidates and their events, rules, audit, the dreaming pool and runs,
-- plus the ingestion checkpoint, per-session ingest facts and the LEDGER outbox.

CREATE TABLE ledger.evidence (
    id              text PRIMARY KEY,
    scope_id        text NOT NULL,
    session_id      text NOT NULL DEFAULT '',
    agent_key       text NOT NULL DEFAULT '',
    session_type    text NOT NULL DEFAULT 'root'
                    CHECK (session_type IN ('root', 'subagent', 'fork')),
    source_class    text NOT NULL CHECK (source_class IN
                    ('system', 'user_input', 'user_correction', 'external_tool', 'agent_authored')),
    authority       text NOT NULL CHECK (authority IN
                    ('system_policy', 'user_explicit', 'user_correction', 'single_observation',
                     'agent_inference', 'agent_self_evaluation', 'external_information')),
    confidence      double precision NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    durability      double precision NOT NULL CHECK (durability BETWEEN 0 AND 1),
    sensitivity     text NOT NULL CHECK (sensitivity IN ('public', 'private', 'sensitive', 'secret')),
    claim_domain    text NOT NULL CHECK (claim_domain IN
                    ('user_fact', 'user_preference', 'work', 'experience', 'style', 'external_fact')),
    content         text NOT NULL CHECK (content <> ''),
    content_hash    text NOT NULL CHECK (length(content_hash) = 64),
    source_ref      text NOT NULL DEFAULT '{}',  -- JSON text, byte-exact: the id derives from it
    source_event_id text,
    source_label    text NOT NULL DEFAULT '',
    ingest          text NOT NULL DEFAULT '',
    flags           text[] NOT NULL DEFAULT '{}',
    tokens          integer NOT NULL DEFAULT 0,
    observed_at     timestamptz NOT NULL,
    valid_from      timestamptz,
    valid_until     timestamptz,
    state           text NOT NULL DEFAULT 'active'
                    CHECK (state IN ('active', 'quarantined', 'superseded', 'redacted')),
    supersedes      text[] NOT NULL DEFAULT '{}',
    metadata        jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ledger.evidence IS
    'Append-only: rows change only by audited state transitions and redaction.';
CREATE INDEX evidence_scope_state ON ledger.evidence (scope_id, state);
CREATE INDEX evidence_content_hash ON ledger.evidence (content_hash);
CREATE INDEX evidence_recent_in_scope ON ledger.evidence (scope_id, observed_at DESC)
    WHERE state = 'active';
CREATE INDEX evidence_recent_in_session ON ledger.evidence (scope_id, session_id, observed_at DESC)
    WHERE state = 'active';
CREATE INDEX evidence_export_order ON ledger.evidence (created_at, id);

-- The lexical channel: one posting per (evidence, term) for rows that recall may read
-- (active and superseded). Each term's newest postings are one short index range.
CREATE TABLE ledger.evidence_term (
    scope_id    text NOT NULL,
    term        text NOT NULL,
    observed_at timestamptz NOT NULL,
    evidence_id text NOT NULL,
    PRIMARY KEY (scope_id, term, observed_at, evidence_id)
);

CREATE TABLE ledger.observation (
    id           text PRIMARY KEY,
    scope_id     text NOT NULL,
    subject      text NOT NULL CHECK (subject <> ''),
    predicate    text NOT NULL CHECK (predicate <> ''),
    claim_domain text NOT NULL CHECK (claim_domain IN
                 ('user_fact', 'user_preference', 'work', 'experience', 'style', 'external_fact')),
    authority    text,
    text         text NOT NULL CHECK (text <> '' AND length(text) <= 500),
    evidence_ids text[] NOT NULL DEFAULT '{}',
    supersedes   text[] NOT NULL DEFAULT '{}',
    state        text NOT NULL DEFAULT 'active'
                 CHECK (state IN ('active', 'superseded', 'quarantined')),
    flags        text[] NOT NULL DEFAULT '{}',
    observed_at  timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
-- One active observation per key: a same-key write supersedes it (lineage in `supersedes`).
CREATE UNIQUE INDEX observation_active_key
    ON ledger.observation (scope_id, subject, predicate, claim_domain) WHERE state = 'active';
CREATE INDEX observation_scope ON ledger.observation (scope_id, state, observed_at DESC);
CREATE INDEX observation_export_order ON ledger.observation (created_at, id);

CREATE TABLE ledger.candidate (
    id              text PRIMARY KEY,
    scope_id        text NOT NULL,
    domain          text NOT NULL,
    evidence_ids    text[] NOT NULL DEFAULT '{}',
    state           text NOT NULL DEFAULT 'proposed'
                    CHECK (state IN ('proposed', 'promoted', 'rejected', 'superseded', 'rolled_back')),
    policy          jsonb,
    decision_reason text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ledger.candidate_events (
    id           bigserial PRIMARY KEY,
    candidate_id text NOT NULL REFERENCES ledger.candidate (id),
    ts           timestamptz NOT NULL DEFAULT now(),
    event        text NOT NULL CHECK (event IN ('create', 'promote', 'reject', 'rollback', 'supersede')),
    reason       text NOT NULL DEFAULT '',
    actor        text NOT NULL,
    payload      jsonb
);
CREATE INDEX candidate_events_candidate ON ledger.candidate_events (candidate_id, id);

CREATE TABLE ledger.rule (
    id           text PRIMARY KEY,
    scope_id     text NOT NULL,
    domain       text NOT NULL CHECK (length(domain) BETWEEN 1 AND 24),
    title        text NOT NULL CHECK (length(title) BETWEEN 1 AND 60),
    text         text NOT NULL CHECK (length(text) BETWEEN 1 AND 200),
    gates        text[] NOT NULL DEFAULT '{}',
    evidence_ids text[] NOT NULL DEFAULT '{}',
    supersedes   text NOT NULL DEFAULT '',
    state        text NOT NULL DEFAULT 'draft'
                 CHECK (state IN ('draft', 'active', 'rejected', 'superseded')),
    source       text NOT NULL DEFAULT 'consolidation',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    active_from  timestamptz,
    active_until timestamptz
);
CREATE INDEX rule_scope_state ON ledger.rule (scope_id, state);

CREATE TABLE ledger.audit (
    id         bigserial PRIMARY KEY,
    ts         timestamptz NOT NULL DEFAULT now(),
    op         text NOT NULL,
    target_id  text,
    scope_id   text NOT NULL,
    actor      text NOT NULL,
    reason     text NOT NULL DEFAULT '',
    payload    jsonb,
    dedupe_key text  -- set by ingestion: a redelivered event audits once
);
CREATE UNIQUE INDEX audit_dedupe ON ledger.audit (dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX audit_scope ON ledger.audit (scope_id, id DESC);
CREATE INDEX audit_target ON ledger.audit (target_id, id DESC);

CREATE TABLE ledger.candidate_memory (
    id              text PRIMARY KEY,
    scope_id        text NOT NULL,
    state           text NOT NULL DEFAULT 'candidate'
                    CHECK (state IN ('candidate', 'observed', 'consensus', 'approved', 'rejected')),
    claim_domain    text NOT NULL,
    subject         text NOT NULL DEFAULT '',
    text            text NOT NULL,
    observation_ids text[] NOT NULL DEFAULT '{}',
    evidence_ids    text[] NOT NULL DEFAULT '{}',
    sessions        text[] NOT NULL DEFAULT '{}',
    days            integer NOT NULL DEFAULT 0,
    occurrences     integer NOT NULL DEFAULT 0,
    first_seen      timestamptz,
    last_seen       timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ledger.dream_run (
    id          bigserial PRIMARY KEY,
    ts          timestamptz NOT NULL DEFAULT now(),
    window_from timestamptz,
    window_to   timestamptz,
    scanned     integer NOT NULL DEFAULT 0,
    clustered   integer NOT NULL DEFAULT 0,
    promoted    integer NOT NULL DEFAULT 0,
    archived    integer NOT NULL DEFAULT 0,
    dry_run     boolean NOT NULL DEFAULT true,
    note        text NOT NULL DEFAULT ''
);

-- Ingestion: the highest SESSIONS sequence committed per durable consumer (written in the same
-- transaction as the rows), and what ingestion learned about each session.
CREATE TABLE ledger.ingest_checkpoint (
    consumer   text PRIMARY KEY,
    stream_seq bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ledger.ingest_session (
    session_id        text PRIMARY KEY,
    chat_id           text NOT NULL,
    session_type      text NOT NULL DEFAULT 'root'
                      CHECK (session_type IN ('root', 'subagent', 'fork')),
    parent_session_id text,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- LEDGER facts committed with the rows they describe; published (Nats-Msg-Id = fact id) and
-- deleted after the stream acknowledged them.
CREATE TABLE ledger.outbox (
    id         bigserial PRIMARY KEY,
    msg_id     text NOT NULL,
    subject    text NOT NULL,
    body       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
