-- The metadata the pre-hooks attached to a request (a JSON object of
-- strings), stored with the reply that answers it.
ALTER TABLE replies ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
