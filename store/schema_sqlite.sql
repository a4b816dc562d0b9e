-- The SQLite schema the migrations in migrations/ produce, made on a new
-- database in one transaction (schema.go). Generated from the migrations by
-- go generate ./store; do not edit.
-- schema_version: 194
CREATE TABLE schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
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
, state TEXT NOT NULL DEFAULT '{}');
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
, attachments TEXT, name TEXT NOT NULL DEFAULT '');
CREATE INDEX messages_session ON messages (session_id, id);
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
, request_id INTEGER);
CREATE INDEX signals_reply ON signals (reply_id);
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
, retry_after INTEGER NOT NULL DEFAULT 0);
CREATE INDEX usage_conversation ON usage (conversation, at);
CREATE TABLE plugin_state (
    plugin_id  TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL, -- unix ms
    PRIMARY KEY (plugin_id, key)
) WITHOUT ROWID;
CREATE TABLE plugin_binding (
    name     TEXT    PRIMARY KEY,
    path     TEXT    NOT NULL,
    sha256   TEXT    NOT NULL,
    bound_at INTEGER NOT NULL -- unix ms
) WITHOUT ROWID;
CREATE TABLE plugin_state_usage (
    plugin_id TEXT    PRIMARY KEY,
    keys      INTEGER NOT NULL,
    bytes     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER plugin_state_usage_insert AFTER INSERT ON plugin_state BEGIN
    INSERT INTO plugin_state_usage (plugin_id, keys, bytes)
        VALUES (NEW.plugin_id, 1, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
        ON CONFLICT (plugin_id) DO UPDATE SET keys = keys + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER plugin_state_usage_update AFTER UPDATE ON plugin_state BEGIN
    UPDATE plugin_state_usage
        SET bytes = bytes - (length(CAST(OLD.key AS BLOB)) + length(CAST(OLD.value AS BLOB)))
        WHERE plugin_id = OLD.plugin_id;
    INSERT INTO plugin_state_usage (plugin_id, keys, bytes)
        VALUES (NEW.plugin_id, 0, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
        ON CONFLICT (plugin_id) DO UPDATE SET bytes = bytes + excluded.bytes;
    UPDATE plugin_state_usage SET keys = keys - 1 WHERE plugin_id = OLD.plugin_id AND OLD.plugin_id <> NEW.plugin_id;
    UPDATE plugin_state_usage SET keys = keys + 1 WHERE plugin_id = NEW.plugin_id AND OLD.plugin_id <> NEW.plugin_id;
END;
CREATE TRIGGER plugin_state_usage_delete AFTER DELETE ON plugin_state BEGIN
    UPDATE plugin_state_usage
        SET keys = keys - 1, bytes = bytes - (length(CAST(OLD.key AS BLOB)) + length(CAST(OLD.value AS BLOB)))
        WHERE plugin_id = OLD.plugin_id;
END;
CREATE TABLE "queue" (
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
, interruptions INTEGER NOT NULL DEFAULT 0, notified INTEGER NOT NULL DEFAULT 0, holder TEXT NOT NULL DEFAULT '', lease INTEGER NOT NULL DEFAULT 0, lease_until INTEGER NOT NULL DEFAULT 0, waiting INTEGER NOT NULL DEFAULT 0);
CREATE INDEX queue_pending ON queue (conversation, id) WHERE status IN ('queued', 'running');
CREATE INDEX queue_status ON queue (status, id);
CREATE UNIQUE INDEX signals_request ON signals (request_id, kind, COALESCE(reply_id, 0)) WHERE request_id IS NOT NULL;
CREATE TABLE escalations (
    session_id   INTEGER PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    question     TEXT    NOT NULL DEFAULT '',
    models       TEXT    NOT NULL DEFAULT '[]',
    updated_at   INTEGER NOT NULL
);
CREATE TABLE lua_kv (
    script     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL, -- unix ms
    PRIMARY KEY (script, key)
) WITHOUT ROWID;
CREATE INDEX sessions_last_access ON sessions (last_access);
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
, streaming INTEGER NOT NULL DEFAULT 0, files TEXT NOT NULL DEFAULT '[]');
CREATE INDEX replies_session ON replies (session_id, id);
CREATE TABLE memories (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    owner      TEXT    NOT NULL,            -- "<channel>:<user id>" of whom it is about
    shared     INTEGER NOT NULL DEFAULT 0,  -- 1: recalled for every user
    content    TEXT    NOT NULL,
    tags       TEXT    NOT NULL DEFAULT '', -- space-separated, lower case
    steps      TEXT    NOT NULL DEFAULT '', -- a workflow's steps (JSON)
    outcome    TEXT    NOT NULL DEFAULT '', -- a workflow's outcome: success or failed
    task_type  TEXT    NOT NULL DEFAULT '',
    request_id INTEGER,                     -- the request whose answer recorded a workflow
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
, place TEXT NOT NULL DEFAULT '');
CREATE INDEX memories_owner ON memories (owner, id);
CREATE INDEX memories_request ON memories (request_id) WHERE request_id IS NOT NULL;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    scope, content, tags, content = '', contentless_delete = 1, tokenize = 'porter unicode61');
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, scope, content, tags) VALUES (new.id,
        'u' || lower(hex(new.owner)) || CASE WHEN new.shared THEN ' shared' ELSE '' END, new.content, new.tags);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF owner, shared, content, tags ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
    INSERT INTO memories_fts (rowid, scope, content, tags) VALUES (new.id,
        'u' || lower(hex(new.owner)) || CASE WHEN new.shared THEN ' shared' ELSE '' END, new.content, new.tags);
END;
CREATE TRIGGER signals_judge_workflow AFTER INSERT ON signals
WHEN new.reply_id IS NOT NULL AND (new.polarity < 0 OR (new.polarity > 0 AND new.kind = 'reaction'))
BEGIN
    UPDATE memories SET outcome = CASE WHEN new.polarity < 0 THEN 'failed' ELSE 'success' END, updated_at = new.at
    WHERE outcome != '' AND request_id = (SELECT request_id FROM replies WHERE id = new.reply_id);
END;
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
, private INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX schedules_key ON schedules (source, key) WHERE key != '';
CREATE TABLE media (
    sha256     TEXT    PRIMARY KEY,
    mime       TEXT    NOT NULL,
    size       INTEGER NOT NULL,
    text       TEXT,
    created_at INTEGER NOT NULL,
    used_at    INTEGER NOT NULL
);
CREATE INDEX media_used ON media (used_at);
CREATE TABLE media_sources (
    source     TEXT    PRIMARY KEY,
    sha256     TEXT    NOT NULL REFERENCES media (sha256) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
);
CREATE TABLE router_arms (
    task_type    TEXT    NOT NULL,
    model        TEXT    NOT NULL,
    drop_llr     REAL    NOT NULL DEFAULT 0,
    drop_ref     REAL    NOT NULL DEFAULT 0,
    drop_pos     REAL    NOT NULL DEFAULT 0,
    drop_neg     REAL    NOT NULL DEFAULT 0,
    rise_llr     REAL    NOT NULL DEFAULT 0,
    rise_ref     REAL    NOT NULL DEFAULT 0,
    rise_pos     REAL    NOT NULL DEFAULT 0,
    rise_neg     REAL    NOT NULL DEFAULT 0,
    pool_pos     REAL    NOT NULL DEFAULT 0,
    pool_neg     REAL    NOT NULL DEFAULT 0,
    seq_active   BOOLEAN NOT NULL DEFAULT FALSE,
    seq_p0       REAL    NOT NULL DEFAULT 0,
    seq_p1       REAL    NOT NULL DEFAULT 0,
    seq_llr      REAL    NOT NULL DEFAULT 0,
    seq_pos      REAL    NOT NULL DEFAULT 0,
    seq_neg      REAL    NOT NULL DEFAULT 0,
    seq_n        INTEGER NOT NULL DEFAULT 0,
    seq_seen     INTEGER NOT NULL DEFAULT 0,
    last_probe   BIGINT  NOT NULL DEFAULT 0,
    settled_vs   TEXT    NOT NULL DEFAULT '',
    settled_at   BIGINT  NOT NULL DEFAULT 0,
    change_at    BIGINT  NOT NULL DEFAULT 0,
    change_dir   INTEGER NOT NULL DEFAULT 0,
    change_scope TEXT    NOT NULL DEFAULT '',
    updated_at   BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (task_type, model)
);
CREATE TABLE router_tasks (
    task_type    TEXT   NOT NULL PRIMARY KEY,
    probe_tokens REAL   NOT NULL DEFAULT 0,
    probe_cost   REAL   NOT NULL DEFAULT 0,
    choices      REAL   NOT NULL DEFAULT 0,
    choices_at   BIGINT NOT NULL DEFAULT 0,
    first_seen   BIGINT NOT NULL DEFAULT 0,
    incumbent    TEXT   NOT NULL DEFAULT '',
    updated_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX replies_created ON replies (created_at);
CREATE TABLE queue_heads (
    conversation TEXT    PRIMARY KEY,
    head         INTEGER NOT NULL,
    due          INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER queue_heads_insert AFTER INSERT ON queue
WHEN NEW.status IN ('queued', 'running') BEGIN
    INSERT INTO queue_heads (conversation, head, due) VALUES (NEW.conversation, NEW.id, NEW.not_before)
        ON CONFLICT (conversation) DO NOTHING;
END;
CREATE TRIGGER queue_heads_due AFTER UPDATE OF not_before ON queue
WHEN NEW.not_before <> OLD.not_before AND NEW.status IN ('queued', 'running') BEGIN
    UPDATE queue_heads SET due = NEW.not_before WHERE conversation = NEW.conversation AND head = NEW.id;
END;
CREATE TRIGGER queue_heads_advance AFTER UPDATE OF status ON queue
WHEN NEW.status NOT IN ('queued', 'running') AND OLD.status IN ('queued', 'running') BEGIN
    DELETE FROM queue_heads WHERE conversation = NEW.conversation AND head = NEW.id;
    INSERT INTO queue_heads (conversation, head, due)
        SELECT conversation, id, not_before FROM queue
        WHERE conversation = NEW.conversation AND status IN ('queued', 'running') ORDER BY id LIMIT 1
        ON CONFLICT (conversation) DO NOTHING;
END;
CREATE UNIQUE INDEX sessions_active ON sessions (conversation) WHERE active = TRUE;
CREATE INDEX memories_shared ON memories (id) WHERE shared = TRUE;
CREATE TABLE leases (
    name    TEXT    PRIMARY KEY,
    holder  TEXT    NOT NULL DEFAULT '',
    epoch   INTEGER NOT NULL DEFAULT 0,
    expires INTEGER NOT NULL DEFAULT 0,
    data    BLOB    NOT NULL DEFAULT X''
) WITHOUT ROWID;
CREATE TABLE schedule_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
CREATE TRIGGER schedules_version_insert AFTER INSERT ON schedules BEGIN
    UPDATE schedule_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER schedules_version_update AFTER UPDATE ON schedules BEGIN
    UPDATE schedule_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER schedules_version_delete AFTER DELETE ON schedules BEGIN
    UPDATE schedule_version SET version = version + 1 WHERE id = 1;
END;
CREATE TABLE replicas (
    id          TEXT    PRIMARY KEY,
    host        TEXT    NOT NULL DEFAULT '',
    version     TEXT    NOT NULL DEFAULT '',
    config_hash TEXT    NOT NULL DEFAULT '',
    started     INTEGER NOT NULL,
    heartbeat   INTEGER NOT NULL,
    stopped     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE notices (
    key   TEXT    PRIMARY KEY,
    until INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX replies_conversation ON replies (conversation);
CREATE TABLE sealed (
    name       TEXT    PRIMARY KEY,
    sealed     BLOB    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sealed_expires ON sealed (expires_at);
CREATE TABLE media_bytes (
    sha256 TEXT PRIMARY KEY REFERENCES media (sha256) ON DELETE CASCADE,
    data   BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE settings (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE TABLE "deliveries" (
    reply_id    INTEGER NOT NULL REFERENCES replies (id) ON DELETE CASCADE,
    part        INTEGER NOT NULL,
    channel     TEXT    NOT NULL,
    platform_id TEXT    NOT NULL,
    sent_at     INTEGER NOT NULL,
    draft       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (reply_id, part)
) WITHOUT ROWID;
CREATE INDEX deliveries_platform ON deliveries (channel, platform_id);
CREATE INDEX messages_summary ON messages (session_id, id) WHERE summary = TRUE;
CREATE TABLE lua_kv_usage (
    script TEXT    PRIMARY KEY,
    keys   INTEGER NOT NULL,
    bytes  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER lua_kv_usage_insert AFTER INSERT ON lua_kv BEGIN
    INSERT INTO lua_kv_usage (script, keys, bytes)
        VALUES (NEW.script, 1, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
        ON CONFLICT (script) DO UPDATE SET keys = keys + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER lua_kv_usage_update AFTER UPDATE ON lua_kv BEGIN
    UPDATE lua_kv_usage
        SET bytes = bytes - (length(CAST(OLD.key AS BLOB)) + length(CAST(OLD.value AS BLOB)))
        WHERE script = OLD.script;
    INSERT INTO lua_kv_usage (script, keys, bytes)
        VALUES (NEW.script, 0, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
        ON CONFLICT (script) DO UPDATE SET bytes = bytes + excluded.bytes;
    UPDATE lua_kv_usage SET keys = keys - 1 WHERE script = OLD.script AND OLD.script <> NEW.script;
    UPDATE lua_kv_usage SET keys = keys + 1 WHERE script = NEW.script AND OLD.script <> NEW.script;
END;
CREATE TRIGGER lua_kv_usage_delete AFTER DELETE ON lua_kv BEGIN
    UPDATE lua_kv_usage
        SET keys = keys - 1, bytes = bytes - (length(CAST(OLD.key AS BLOB)) + length(CAST(OLD.value AS BLOB)))
        WHERE script = OLD.script;
END;
CREATE INDEX replies_conversation_created ON replies (conversation, created_at);
INSERT INTO schedule_version VALUES (1, 0);
INSERT INTO sqlite_sequence VALUES ('queue', 0);
