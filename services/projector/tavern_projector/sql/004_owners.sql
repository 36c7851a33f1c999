-- Owners (principals): the user each session belongs to, from its `session/created`.
-- Sessions projected before owners were recorded belong to the default owner `local`.
ALTER TABLE projector.sessions ADD COLUMN owner text NOT NULL DEFAULT 'local';
CREATE INDEX sessions_owner_activity ON projector.sessions (owner, last_activity DESC);
