-- Where a memory was saved: '' in a private chat with the bot (and for
-- every memory saved before this migration), else "<channel>:<chat>" of
-- the group conversation it was saved in. A group's turn recalls only
-- the memories saved in that group (and the shared ones): a fact told
-- the bot in private is never put into an answer others read.
ALTER TABLE memories ADD COLUMN place TEXT NOT NULL DEFAULT '';
