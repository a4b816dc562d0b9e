-- Pairing (channels.<x>.access: pairing): each user who asked to talk to
-- the bot on a channel, the code they were given, and an admin's decision.
CREATE TABLE pairings (
    channel      TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    user_name    TEXT    NOT NULL DEFAULT '',
    conversation TEXT    NOT NULL DEFAULT '',
    code         TEXT    NOT NULL UNIQUE,
    status       TEXT    NOT NULL DEFAULT 'pending',
    requested_at INTEGER NOT NULL,
    decided_at   INTEGER NOT NULL DEFAULT 0,
    decided_by   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (channel, user_id)
) WITHOUT ROWID;
