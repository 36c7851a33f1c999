-- The file stem a card was imported from (`default_Seraphina.png` -> `default_Seraphina`):
-- SillyTavern finds a character's chats in `chats/<file stem>/`.
ALTER TABLE projector.characters ADD COLUMN file_stem text;
