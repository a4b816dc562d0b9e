-- Interruptions (a crash or kill while running) are counted apart from
-- failed attempts: the poison-message guard looks at the first, the retry
-- budget at the second. notified records that the user was told their
-- answer is delayed (every credential and model cooling).
ALTER TABLE queue ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue ADD COLUMN notified INTEGER NOT NULL DEFAULT 0;

-- A signal recorded while handling a queue item carries its id, so a
-- retried item records it once.
ALTER TABLE signals ADD COLUMN request_id INTEGER;
CREATE UNIQUE INDEX signals_request ON signals (request_id, kind, COALESCE(reply_id, 0)) WHERE request_id IS NOT NULL;

-- The escalation of each session's latest rejected question: the models
-- that already answered it.
CREATE TABLE escalations (
    session_id   INTEGER PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    question     TEXT    NOT NULL DEFAULT '',
    models       TEXT    NOT NULL DEFAULT '[]',
    updated_at   INTEGER NOT NULL
);
