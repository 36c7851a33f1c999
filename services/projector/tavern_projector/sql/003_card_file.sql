-- The file stem a card was imported from (`default_Seraphina.png` -> `default_Seraphina`):
-- SillyTavern finds a character's chats in `chats/<file stem>/`.
ALTER TABLE projector.characters ADD COLUMN file_stem text;

-- When a chat file was last found changed by someone else (SillyTavern re-saving it, a person
-- editing it): the projector then continues the file as it found it, never overwriting it.
ALTER TABLE projector.chats ADD COLUMN edited_outside_at timestamptz;
