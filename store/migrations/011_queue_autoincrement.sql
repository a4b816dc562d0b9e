-- Queue ids are never reused: replies, history entries and deliveries
-- keep the id of the request they answer long after its queue row is
-- pruned, so a new request must never get an old id. The table is copied
-- into one declared AUTOINCREMENT, and the id sequence starts past every
-- id any table still refers to.
CREATE TABLE queue_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    dedupe_key   TEXT    NOT NULL UNIQUE,
    kind         TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    status       TEXT    NOT NULL DEFAULT 'queued',
    attempts     INTEGER NOT NULL DEFAULT 0,
    not_before   INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
INSERT INTO queue_new (id, dedupe_key, kind, conversation, payload, status, attempts, not_before, last_error, created_at, updated_at)
    SELECT id, dedupe_key, kind, conversation, payload, status, attempts, not_before, last_error, created_at, updated_at FROM queue;
DROP TABLE queue;
ALTER TABLE queue_new RENAME TO queue;
CREATE INDEX queue_pending ON queue (conversation, id) WHERE status IN ('queued', 'running');
CREATE INDEX queue_status ON queue (status, id);
DELETE FROM sqlite_sequence WHERE name IN ('queue', 'queue_new');
INSERT INTO sqlite_sequence (name, seq) SELECT 'queue', COALESCE(MAX(n), 0) FROM (
    SELECT MAX(id) AS n FROM queue
    UNION ALL SELECT MAX(request_id) FROM replies
    UNION ALL SELECT MAX(request_id) FROM messages);
