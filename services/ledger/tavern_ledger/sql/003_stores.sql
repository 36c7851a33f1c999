-- The stores: session bindings (from the session log), memory records, variables by scope,
-- and the outbox of their LEDGER facts still to publish (audit goes to ledger.audit).

CREATE TABLE ledger.session_binding (
  session_id        text PRIMARY KEY,
  architecture      text NOT NULL,
  context_mode      text,
  chat_id           text NOT NULL,
  character_id      text,
  persona_id        text,
  agent_id          text NOT NULL,
  parent_session_id text,
  updated_seq       bigint NOT NULL,
  updated_at        timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ledger.session_binding IS
  'Projection of session/created and session/binding-changed; a row changes only for a higher seq.';

CREATE TABLE ledger.turn_closed (
  session_id      text PRIMARY KEY,
  last_ended_turn integer NOT NULL
);
COMMENT ON TABLE ledger.turn_closed IS
  'The last turn/end seen per session: turn-scope variables of that turn or earlier are gone.';

CREATE TABLE ledger.memory (
  id           text PRIMARY KEY,
  scope        text NOT NULL CHECK (scope IN ('chat', 'character', 'agent', 'global')),
  scope_id     text NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('semantic', 'episodic')),
  content      text NOT NULL,
  tags         text[] NOT NULL DEFAULT '{}',
  importance   double precision NOT NULL,
  confidence   double precision NOT NULL,
  claim_domain text NOT NULL,
  source       jsonb NOT NULL,
  state        text NOT NULL CHECK (state IN ('active', 'quarantined', 'forgotten')),
  gate_reasons text[] NOT NULL DEFAULT '{}',
  revision     integer NOT NULL CHECK (revision >= 1),
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  expires_at   timestamptz,
  forgotten_at timestamptz
);
CREATE INDEX memory_scope_created_idx ON ledger.memory (scope, scope_id, state, created_at DESC);
CREATE INDEX memory_tags_idx ON ledger.memory USING gin (tags);

CREATE TABLE ledger.variable_scope (
  scope       text NOT NULL CHECK (scope IN ('turn', 'chat', 'character', 'agent', 'global')),
  scope_id    text NOT NULL,
  turn        integer NOT NULL DEFAULT 0,
  revision    bigint NOT NULL DEFAULT 0,
  total_bytes integer NOT NULL DEFAULT 0,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, scope_id, turn)
);
COMMENT ON TABLE ledger.variable_scope IS
  'One row per variable scope; locked FOR UPDATE by every change, whose revision it bumps.';

CREATE TABLE ledger.variable (
  scope       text NOT NULL,
  scope_id    text NOT NULL,
  turn        integer NOT NULL DEFAULT 0,
  name        text NOT NULL,
  value       jsonb NOT NULL,
  size_bytes  integer NOT NULL,
  revision    bigint NOT NULL,
  updated_at  timestamptz NOT NULL,
  session_id  text NOT NULL,
  PRIMARY KEY (scope, scope_id, turn, name),
  FOREIGN KEY (scope, scope_id, turn)
    REFERENCES ledger.variable_scope (scope, scope_id, turn) ON DELETE CASCADE
);

CREATE TABLE ledger.store_outbox (
  msg_id     text PRIMARY KEY,
  subject    text NOT NULL,
  data       bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ledger.store_outbox IS
  'LEDGER facts written with their change, deleted once JetStream acknowledged them.';
