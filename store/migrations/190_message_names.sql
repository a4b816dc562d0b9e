-- The speaker of a user's history entry in a group conversation: the
-- display name the channel gave (Inbound.UserName, cleaned and capped by
-- the orchestrator). The orchestrator attributes earlier turns of a
-- group's history by it when it builds the prompt; '' for the entries of
-- private chats, the assistant's and tools' entries, and every entry
-- written before this migration.
ALTER TABLE messages ADD COLUMN name TEXT NOT NULL DEFAULT '';
