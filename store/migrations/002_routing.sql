-- Quality signals as they arrive: each judges one reply (and so its model
-- and task type).
CREATE TABLE signals (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    kind      TEXT    NOT NULL,
    polarity  INTEGER NOT NULL,
    reply_id  INTEGER,
    model     TEXT    NOT NULL DEFAULT '',
    task_type TEXT    NOT NULL DEFAULT '',
    user_id   TEXT    NOT NULL DEFAULT '',
    weight    REAL    NOT NULL DEFAULT 1
);
CREATE INDEX signals_at ON signals (at);
CREATE INDEX signals_reply ON signals (reply_id);

-- Decayed (task type, model) evidence built from the signals.
CREATE TABLE affinity (
    task_type   TEXT    NOT NULL,
    model       TEXT    NOT NULL,
    pos         REAL    NOT NULL DEFAULT 0,
    neg         REAL    NOT NULL DEFAULT 0,
    positives   INTEGER NOT NULL DEFAULT 0,
    negatives   INTEGER NOT NULL DEFAULT 0,
    last_signal INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task_type, model)
);

-- Auth profile usage and cooldowns; the credentials never live here.
CREATE TABLE profiles (
    provider         TEXT    NOT NULL,
    id               TEXT    NOT NULL PRIMARY KEY,
    uses             INTEGER NOT NULL DEFAULT 0,
    last_used        INTEGER NOT NULL DEFAULT 0,
    cooldown_until   INTEGER NOT NULL DEFAULT 0,
    last_probe       INTEGER NOT NULL DEFAULT 0,
    failures         INTEGER NOT NULL DEFAULT 0,
    billing_failures INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX usage_conversation ON usage (conversation, at);
