-- The durable request queue: one row per accepted platform event.
CREATE TABLE queue (
    id           INTEGER PRIMARY KEY,
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
CREATE INDEX queue_pending ON queue (conversation, id) WHERE status IN ('queued', 'running');
CREATE INDEX queue_status ON queue (status, id);

-- One active session per conversation; /new ends it and starts another.
CREATE TABLE sessions (
    id            INTEGER PRIMARY KEY,
    conversation  TEXT    NOT NULL,
    active        INTEGER NOT NULL DEFAULT 1,
    model_pin     TEXT    NOT NULL DEFAULT '',
    profile_pin   TEXT    NOT NULL DEFAULT '',
    metadata      TEXT    NOT NULL DEFAULT '{}',
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL    NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    last_access   INTEGER NOT NULL,
    ended_at      INTEGER
);
CREATE UNIQUE INDEX sessions_active ON sessions (conversation) WHERE active = 1;

-- The history of each session as the LLM sees it.
CREATE TABLE messages (
    id           INTEGER PRIMARY KEY,
    session_id   INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    request_id   INTEGER,
    role         TEXT    NOT NULL,
    content      TEXT    NOT NULL DEFAULT '',
    tool_calls   TEXT,
    tool_call_id TEXT    NOT NULL DEFAULT '',
    summary      INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL
);
CREATE INDEX messages_session ON messages (session_id, id);

-- Each answer, stored before it is sent.
CREATE TABLE replies (
    id            INTEGER PRIMARY KEY,
    request_id    INTEGER UNIQUE,
    session_id    INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    conversation  TEXT    NOT NULL,
    text          TEXT    NOT NULL,
    parts         TEXT    NOT NULL,
    model         TEXT    NOT NULL DEFAULT '',
    task_type     TEXT    NOT NULL DEFAULT '',
    reason        TEXT    NOT NULL DEFAULT '',
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL    NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL
);
CREATE INDEX replies_session ON replies (session_id, id);

-- Each sent part of a reply, with the platform's message id.
CREATE TABLE deliveries (
    reply_id    INTEGER NOT NULL REFERENCES replies (id) ON DELETE CASCADE,
    part        INTEGER NOT NULL,
    channel     TEXT    NOT NULL,
    platform_id TEXT    NOT NULL,
    sent_at     INTEGER NOT NULL,
    PRIMARY KEY (reply_id, part)
);
CREATE INDEX deliveries_platform ON deliveries (channel, platform_id);

-- Tokens and cost of every LLM call.
CREATE TABLE usage (
    id            INTEGER PRIMARY KEY,
    at            INTEGER NOT NULL,
    session_id    INTEGER,
    conversation  TEXT    NOT NULL DEFAULT '',
    user_id       TEXT    NOT NULL DEFAULT '',
    model         TEXT    NOT NULL,
    purpose       TEXT    NOT NULL DEFAULT 'chat',
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL    NOT NULL DEFAULT 0
);
CREATE INDEX usage_at ON usage (at);
