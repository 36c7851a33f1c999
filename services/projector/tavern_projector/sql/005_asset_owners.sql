-- Owners of assets: the user each character, lorebook and persona belongs to, from its
-- `asset/imported` (or `asset/updated`) event. Assets projected before owners were recorded
-- belong to the default owner `local` (the install's owner), as their events read on replay.
ALTER TABLE projector.characters ADD COLUMN owner text NOT NULL DEFAULT 'local';
ALTER TABLE projector.lorebooks ADD COLUMN owner text NOT NULL DEFAULT 'local';
ALTER TABLE projector.personas ADD COLUMN owner text NOT NULL DEFAULT 'local';
CREATE INDEX characters_owner_name ON projector.characters (owner, lower(name));
CREATE INDEX lorebooks_owner_name ON projector.lorebooks (owner, lower(name));
CREATE INDEX personas_owner_name ON projector.personas (owner, lower(name));
