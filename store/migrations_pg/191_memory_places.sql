-- Where a memory was saved: '' in a private chat (and before this
-- migration), else the group conversation "<channel>:<chat>" (191 in
-- migrations).
ALTER TABLE memories ADD COLUMN place TEXT NOT NULL DEFAULT '';
