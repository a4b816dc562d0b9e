-- The speaker of a user's history entry in a group conversation (190 in
-- migrations); '' for every other entry and those written before.
ALTER TABLE messages ADD COLUMN name TEXT NOT NULL DEFAULT '';
