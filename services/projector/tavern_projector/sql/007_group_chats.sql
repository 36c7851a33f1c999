-- Group chats, written as SillyTavern writes them: `group chats/<chat id>.jsonl` (message lines
-- only) and `groups/<group id>.json` (the definition listing the group's chats). The chat's
-- group binding as it stands and its header (which a group chat file does not hold) are kept
-- here, so a chat read back from its file continues, and the definition is written from every
-- chat of the group.
ALTER TABLE projector.chats ADD COLUMN group_id text;
ALTER TABLE projector.chats ADD COLUMN group_binding jsonb;
ALTER TABLE projector.chats ADD COLUMN chat_header jsonb;
CREATE INDEX chats_group ON projector.chats (group_id, created_at) WHERE group_id IS NOT NULL;
