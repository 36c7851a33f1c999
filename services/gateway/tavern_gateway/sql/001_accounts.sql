CREATE SCHEMA IF NOT EXISTS gateway;
COMMENT ON SCHEMA gateway IS 'Owned by the gateway service (tavern_gateway); no other service reads or writes it.';

-- Accounts of the web app, their password hashes (argon2id), web sessions and invites.
-- Secrets are stored only as hashes: a session cookie or invite token as its SHA-256.
CREATE TABLE gateway.accounts (
    name          text PRIMARY KEY,
    principal     text NOT NULL UNIQUE,
    role          text NOT NULL CHECK (role IN ('owner', 'user')),
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX accounts_one_owner ON gateway.accounts (role) WHERE role = 'owner';

CREATE TABLE gateway.web_sessions (
    token_hash  bytea PRIMARY KEY,
    account     text NOT NULL REFERENCES gateway.accounts (name) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX web_sessions_account ON gateway.web_sessions (account);

CREATE TABLE gateway.invites (
    token_hash  bytea PRIMARY KEY,
    created_by  text NOT NULL REFERENCES gateway.accounts (name) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_by     text
);

CREATE TABLE gateway.login_failures (
    account     text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_account ON gateway.login_failures (account, at);

-- What each account imported through the web app: its character gallery.
CREATE TABLE gateway.imports (
    principal     text NOT NULL,
    asset_id      text NOT NULL,
    kind          text NOT NULL,
    name          text NOT NULL,
    image         text,
    greeting      text NOT NULL DEFAULT '',
    imported_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, asset_id)
);
