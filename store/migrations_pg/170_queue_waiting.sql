-- See store/migrations/170_queue_waiting.sql.
ALTER TABLE queue ADD COLUMN waiting BOOLEAN NOT NULL DEFAULT false;
