-- Ingestion across replicas (the same tables on PostgreSQL, 140 in
-- migrations_pg).
--
-- Whether the bot answered in a conversation (a Slack thread's follow-up
-- is for the bot when it did) is read from replies by conversation.
CREATE INDEX replies_conversation ON replies (conversation);

-- Short-lived platform credentials needed to answer later (a Discord
-- interaction's token, 15 minutes; a Slack slash command's response_url,
-- 30 minutes), sealed with AES-256-GCM under state.seal_key (or a key
-- derived from the channels' own secrets), so whichever replica runs the
-- request can answer in place. A row is deleted when its request is
-- answered or when it expires; the plaintext is never stored.
CREATE TABLE sealed (
    name       TEXT    PRIMARY KEY,
    sealed     BLOB    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sealed_expires ON sealed (expires_at);

-- The bytes of a media file, for replicas that share the database; one
-- process on SQLite keeps them in <data_dir>/media only and leaves this
-- table empty.
CREATE TABLE media_bytes (
    sha256 TEXT PRIMARY KEY REFERENCES media (sha256) ON DELETE CASCADE,
    data   BLOB NOT NULL
) WITHOUT ROWID;
