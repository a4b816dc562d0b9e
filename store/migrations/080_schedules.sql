-- Scheduled tasks (config schedules:, /schedule in chat, plugins'
-- declared schedules). A firing is queued with the dedupe key
-- schedule:<id>:<firing time>, so it is answered once; next_fire is the
-- next firing time, last_fire the last one queued. Ids are never reused,
-- so a firing's dedupe key never matches another schedule's.
CREATE TABLE schedules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    source      TEXT    NOT NULL,
    key         TEXT    NOT NULL DEFAULT '',
    interval_ms INTEGER NOT NULL DEFAULT 0,
    cron        TEXT    NOT NULL DEFAULT '',
    spec        TEXT    NOT NULL DEFAULT '',
    prompt      TEXT    NOT NULL DEFAULT '',
    plugin      TEXT    NOT NULL DEFAULT '',
    action      TEXT    NOT NULL DEFAULT '',
    args        TEXT    NOT NULL DEFAULT '{}',
    channel     TEXT    NOT NULL,
    chat        TEXT    NOT NULL,
    thread      TEXT    NOT NULL DEFAULT '',
    model       TEXT    NOT NULL DEFAULT '',
    timezone    TEXT    NOT NULL DEFAULT '',
    missed      TEXT    NOT NULL DEFAULT 'skip',
    creator     TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    last_fire   INTEGER NOT NULL DEFAULT 0,
    next_fire   INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX schedules_key ON schedules (source, key) WHERE key != '';
