-- The consolidator's own state: copies of the ledger facts it reads, per-scope distillation
-- bookkeeping (watermark, caps, failures), the batch audit, dreaming (candidate pool, run ledger,
-- forget marks), rule drafts and the rule view, expression candidates awaiting a decision, audit.

CREATE TABLE consolidator.session (
    session_id text PRIMARY KEY,
    scope_id   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Copies of evidence (from evidence/appended, evidence/state-changed). Redacted rows lose their text.
CREATE TABLE consolidator.evidence (
    id               text PRIMARY KEY,
    scope_id         text NOT NULL,
    session_id       text NOT NULL DEFAULT '',
    seq              bigint,
    event_id         text,
    text             text NOT NULL,
    authority        text NOT NULL,
    claim_domain     text NOT NULL,
    state            text NOT NULL,
    digestible       boolean NOT NULL,
    observed_at      timestamptz NOT NULL,
    state_changed_at timestamptz,
    received_at      timestamptz NOT NULL DEFAULT now()
);
-- Undigested evidence of a scope = active, digestible, after the watermark (observed_at, id).
CREATE INDEX evidence_undigested ON consolidator.evidence (scope_id, observed_at, id)
    WHERE state = 'active' AND digestible;
CREATE INDEX evidence_scope ON consolidator.evidence (scope_id, observed_at);

-- One row per turn/end: the turn counter of a scope is its rows not yet counted by a batch run.
CREATE TABLE consolidator.turn (
    event_id   text PRIMARY KEY,
    session_id text NOT NULL,
    scope_id   text NOT NULL,
    turn       integer NOT NULL,
    ended_at   timestamptz NOT NULL,
    counted_at timestamptz
);
CREATE INDEX turn_pending ON consolidator.turn (scope_id) WHERE counted_at IS NULL;

CREATE TABLE consolidator.scope_state (
    scope_id      text PRIMARY KEY,
    watermark_at  timestamptz,
    watermark_id  text NOT NULL DEFAULT '',
    run_day       date,
    run_count     integer NOT NULL DEFAULT 0,
    fail_count    integer NOT NULL DEFAULT 0,
    last_failure  jsonb,
    retry_at      timestamptz,
    draft_day     date,
    draft_count   integer NOT NULL DEFAULT 0,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The batch audit: one row per distillation run. A row in `distilled` holds the model's output,
-- so a batch resumed after a crash proposes that output again instead of calling the model.
CREATE TABLE consolidator.batch (
    id              bigserial PRIMARY KEY,
    scope_id        text NOT NULL,
    status          text NOT NULL
                    CHECK (status IN ('running', 'distilled', 'ok', 'failed', 'interrupted')),
    mode            text NOT NULL DEFAULT '' CHECK (mode IN ('', 'model', 'fallback')),
    reason          text NOT NULL DEFAULT '',
    batch_from      timestamptz,
    batch_to        timestamptz NOT NULL,
    first_id        text NOT NULL,
    last_id         text NOT NULL,
    evidence_ids    text[] NOT NULL,
    size            integer NOT NULL,
    observations    jsonb,
    proposed        integer NOT NULL DEFAULT 0,
    written         integer NOT NULL DEFAULT 0,
    failures_before integer NOT NULL DEFAULT 0,
    error           text NOT NULL DEFAULT '',
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
);
CREATE UNIQUE INDEX batch_open ON consolidator.batch (scope_id)
    WHERE status IN ('running', 'distilled');
CREATE INDEX batch_scope ON consolidator.batch (scope_id, id DESC);
CREATE INDEX batch_evidence ON consolidator.batch USING gin (evidence_ids);

-- Copies of observations (from observation/upserted).
CREATE TABLE consolidator.observation (
    id           text PRIMARY KEY,
    scope_id     text NOT NULL,
    subject      text NOT NULL,
    predicate    text NOT NULL,
    claim_domain text NOT NULL,
    authority    text NOT NULL,
    text         text NOT NULL,
    evidence_ids text[] NOT NULL DEFAULT '{}',
    supersedes   text,
    state        text NOT NULL DEFAULT 'active',
    observed_at  timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX observation_scope ON consolidator.observation (scope_id, state, observed_at);

-- Dreaming: the candidate pool (physically apart from observations), the run ledger, cold marks.
CREATE TABLE consolidator.candidate_memory (
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
    decided_by      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX candidate_memory_scope ON consolidator.candidate_memory (scope_id, state);

CREATE TABLE consolidator.dream_run (
    id          bigserial PRIMARY KEY,
    ts          timestamptz NOT NULL DEFAULT now(),
    scope_id    text NOT NULL,
    window_from timestamptz,
    window_to   timestamptz,
    scanned     integer NOT NULL DEFAULT 0,
    clustered   integer NOT NULL DEFAULT 0,
    promoted    integer NOT NULL DEFAULT 0,
    archived    integer NOT NULL DEFAULT 0,
    dry_run     boolean NOT NULL DEFAULT false,
    note        text NOT NULL DEFAULT ''
);

CREATE TABLE consolidator.forget_mark (
    kind      text NOT NULL CHECK (kind IN ('observation', 'evidence')),
    target_id text NOT NULL,
    scope_id  text NOT NULL,
    run_id    bigint NOT NULL,
    marked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, target_id)
);
COMMENT ON TABLE consolidator.forget_mark IS 'Cold-storage marks only: nothing is ever deleted.';

-- The rules feedback channel: drafts before they reach the ledger, which evidence was judged,
-- and the view of the ledger's rules (from rule/changed facts; rebuilt from the ledger on demand).
CREATE TABLE consolidator.rule_draft (
    id           text PRIMARY KEY,
    scope_id     text NOT NULL,
    domain       text NOT NULL,
    title        text NOT NULL,
    text         text NOT NULL,
    gates        text[] NOT NULL DEFAULT '{}',
    evidence_ids text[] NOT NULL DEFAULT '{}',
    state        text NOT NULL DEFAULT 'draft' CHECK (state IN ('draft', 'accepted', 'rejected')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    decided_at   timestamptz,
    decided_by   text
);
CREATE INDEX rule_draft_scope ON consolidator.rule_draft (scope_id, state, created_at);

CREATE TABLE consolidator.rule_evidence (
    evidence_id text PRIMARY KEY,
    scope_id    text NOT NULL,
    outcome     text NOT NULL CHECK (outcome IN ('drafted', 'suspect')),
    rule_id     text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE consolidator.rule_view (
    id           text PRIMARY KEY,
    scope_id     text NOT NULL,
    domain       text NOT NULL,
    title        text NOT NULL,
    text         text NOT NULL,
    state        text NOT NULL,
    pinned       boolean NOT NULL DEFAULT false,
    evidence_ids text[] NOT NULL DEFAULT '{}',
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rule_view_scope ON consolidator.rule_view (scope_id, state, updated_at);

-- Expression candidates the consolidator proposed (the ledger holds their event log).
CREATE TABLE consolidator.expression (
    candidate_id text PRIMARY KEY,
    scope_id     text NOT NULL,
    evidence_ids text[] NOT NULL,
    state        text NOT NULL,
    decision     text NOT NULL DEFAULT '',
    reason       text NOT NULL DEFAULT '',
    policy       jsonb,
    surfaced_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX expression_pending ON consolidator.expression (scope_id) WHERE state = 'proposed';

CREATE TABLE consolidator.audit (
    id        bigserial PRIMARY KEY,
    ts        timestamptz NOT NULL DEFAULT now(),
    op        text NOT NULL,
    scope_id  text NOT NULL,
    target_id text,
    actor     text NOT NULL,
    reason    text NOT NULL DEFAULT '',
    payload   jsonb
);
CREATE INDEX audit_scope ON consolidator.audit (scope_id, id DESC);
