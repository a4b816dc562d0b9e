-- Replies and their deliveries outlive the session they answered: the
-- cleanup of expired sessions removes the history, while the usage
-- ledger, quality signals and affinity learning keep referring to the
-- replies. replies.session_id becomes nullable with ON DELETE SET NULL
-- (it was NOT NULL with ON DELETE CASCADE). SQLite cannot alter a
-- foreign key, so both tables are copied aside, dropped (deliveries
-- first, so dropping replies cascades to nothing) and rebuilt, with every
-- column the earlier migrations gave them (metadata: 031).
CREATE TABLE replies_copy AS SELECT * FROM replies;
CREATE TABLE deliveries_copy AS SELECT * FROM deliveries;
DROP TABLE deliveries;
DROP TABLE replies;

CREATE TABLE replies (
    id            INTEGER PRIMARY KEY,
    request_id    INTEGER UNIQUE,
    session_id    INTEGER REFERENCES sessions (id) ON DELETE SET NULL,
    conversation  TEXT    NOT NULL,
    text          TEXT    NOT NULL,
    parts         TEXT    NOT NULL,
    model         TEXT    NOT NULL DEFAULT '',
    task_type     TEXT    NOT NULL DEFAULT '',
    reason        TEXT    NOT NULL DEFAULT '',
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL    NOT NULL DEFAULT 0,
    metadata      TEXT    NOT NULL DEFAULT '{}',
    created_at    INTEGER NOT NULL
);
CREATE INDEX replies_session ON replies (session_id, id);
INSERT INTO replies (id, request_id, session_id, conversation, text, parts, model, task_type, reason,
        input_tokens, output_tokens, cost_usd, metadata, created_at)
    SELECT id, request_id, session_id, conversation, text, parts, model, task_type, reason,
        input_tokens, output_tokens, cost_usd, metadata, created_at FROM replies_copy;

CREATE TABLE deliveries (
    reply_id    INTEGER NOT NULL REFERENCES replies (id) ON DELETE CASCADE,
    part        INTEGER NOT NULL,
    channel     TEXT    NOT NULL,
    platform_id TEXT    NOT NULL,
    sent_at     INTEGER NOT NULL,
    PRIMARY KEY (reply_id, part)
);
CREATE INDEX deliveries_platform ON deliveries (channel, platform_id);
INSERT INTO deliveries (reply_id, part, channel, platform_id, sent_at)
    SELECT reply_id, part, channel, platform_id, sent_at FROM deliveries_copy;

DROP TABLE replies_copy;
DROP TABLE deliveries_copy;
