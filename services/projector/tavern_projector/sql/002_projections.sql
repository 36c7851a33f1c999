-- Read models of the projector, each rebuilt from its stream by replay, and the session archive.

-- One row per projection: its code version and the last stream sequence it applied (written in
-- the same transaction as the projection's rows).
CREATE TABLE projector.checkpoints (
    name        text PRIMARY KEY,
    version     integer NOT NULL,
    stream_seq  bigint NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Every session event as stored in SESSIONS, so a lost stream can be republished in order.
CREATE TABLE projector.session_events (
    stream_seq        bigint PRIMARY KEY,
    subject           text NOT NULL,
    session_id        text NOT NULL,
    log_seq           integer,
    event_id          text,
    event_type        text,
    headers           jsonb NOT NULL DEFAULT '{}'::jsonb,
    data              bytea NOT NULL,
    stored_at         timestamptz,
    redacted_at       timestamptz,
    redaction_reason  text
);
CREATE INDEX session_events_session ON projector.session_events (session_id, log_seq);
CREATE INDEX session_events_stored ON projector.session_events (stored_at);

-- Chat files (SillyTavern JSONL) under <data dir>/chats: which session writes which file.
CREATE TABLE projector.chats (
    session_id         text PRIMARY KEY,
    chat_key           text NOT NULL,
    chat_id            text NOT NULL,
    character          text NOT NULL,
    user_name          text NOT NULL,
    architecture       text NOT NULL,
    context_mode       text,
    parent_session_id  text,
    forked_at_seq      integer,
    created_at         timestamptz NOT NULL,
    message_count      integer NOT NULL DEFAULT 0,
    last_seq           integer NOT NULL DEFAULT 0,
    gen_started        timestamptz,
    revision           text,
    status             text NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'needs_repair')),
    error              text,
    failed_seq         integer,
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chats_status ON projector.chats (status) WHERE status <> 'ok';

-- Messages for tavern_history_search: one row per projected chat message.
CREATE TABLE projector.history (
    session_id  text NOT NULL,
    seq         integer NOT NULL,
    stream_seq  bigint NOT NULL,
    message_id  text NOT NULL,
    is_user     boolean NOT NULL,
    name        text,
    ts          timestamptz NOT NULL,
    text        text NOT NULL,
    tokens      text[] NOT NULL,
    redacted    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX history_tokens ON projector.history USING gin (tokens);

-- Sessions: binding, turns, token usage, activity.
CREATE TABLE projector.sessions (
    session_id         text PRIMARY KEY,
    architecture       text,
    context_mode       text,
    chat_id            text,
    character_id       text,
    persona_id         text,
    parent_session_id  text,
    forked_at_seq      integer,
    title              text,
    created_at         timestamptz,
    last_activity      timestamptz,
    last_seq           integer NOT NULL DEFAULT 0,
    turns              integer NOT NULL DEFAULT 0,
    turns_completed    integer NOT NULL DEFAULT 0,
    turns_cancelled    integer NOT NULL DEFAULT 0,
    turns_failed       integer NOT NULL DEFAULT 0,
    turns_rejected     integer NOT NULL DEFAULT 0,
    open_turn          integer,
    user_messages      integer NOT NULL DEFAULT 0,
    assistant_messages integer NOT NULL DEFAULT 0,
    prompt_tokens      bigint NOT NULL DEFAULT 0,
    completion_tokens  bigint NOT NULL DEFAULT 0,
    total_tokens       bigint NOT NULL DEFAULT 0,
    forks              integer NOT NULL DEFAULT 0
);
CREATE INDEX sessions_activity ON projector.sessions (last_activity DESC);

-- Assets from the ASSETS stream.
CREATE TABLE projector.characters (
    asset_id       text PRIMARY KEY,
    name           text NOT NULL,
    content        jsonb NOT NULL,
    content_hash   text NOT NULL,
    source_format  text,
    image_locator  text,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX characters_name ON projector.characters (lower(name));

CREATE TABLE projector.lorebooks (
    asset_id      text PRIMARY KEY,
    name          text NOT NULL,
    owner_id      text,
    book          jsonb NOT NULL,
    content_hash  text NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX lorebooks_name ON projector.lorebooks (lower(name));
CREATE INDEX lorebooks_owner ON projector.lorebooks (owner_id);

CREATE TABLE projector.personas (
    asset_id      text PRIMARY KEY,
    name          text NOT NULL,
    content       jsonb NOT NULL,
    content_hash  text NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- Memory index from the LEDGER stream.
CREATE TABLE projector.evidence (
    evidence_id   text PRIMARY KEY,
    scope_id      text NOT NULL,
    text          text NOT NULL,
    state         text NOT NULL,
    authority     text,
    claim_domain  text,
    session_id    text,
    seq           integer,
    event_id      text,
    tokens        text[] NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX evidence_tokens ON projector.evidence USING gin (tokens);
CREATE INDEX evidence_origin ON projector.evidence (session_id, seq);

CREATE TABLE projector.memories (
    memory_id   text PRIMARY KEY,
    scope       text NOT NULL,
    scope_id    text NOT NULL,
    kind        text NOT NULL,
    content     text,
    tags        text[] NOT NULL DEFAULT '{}',
    revision    text NOT NULL,
    state       text NOT NULL,
    tokens      text[] NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX memories_tokens ON projector.memories USING gin (tokens);

-- Session messages whose content was redacted in the ledger: every projection drops them.
CREATE TABLE projector.redactions (
    session_id   text NOT NULL,
    seq          integer NOT NULL,
    event_id     text,
    evidence_id  text NOT NULL,
    reason       text,
    redacted_at  timestamptz NOT NULL,
    PRIMARY KEY (session_id, seq)
);
