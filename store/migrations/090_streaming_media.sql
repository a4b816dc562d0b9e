-- Streaming replies: the reply row exists while the answer is streamed
-- (streaming = 1, no text yet) and records the messages the stream opens
-- (deliveries.draft = 1) as they are created, so a restart finishes the
-- answer by editing them.
ALTER TABLE replies ADD COLUMN streaming INTEGER NOT NULL DEFAULT 0;
-- The files a reply carries (a JSON array of name, MIME type, size and
-- SHA-256); file i is delivery part len(parts)+i.
ALTER TABLE replies ADD COLUMN files TEXT NOT NULL DEFAULT '[]';
ALTER TABLE deliveries ADD COLUMN draft INTEGER NOT NULL DEFAULT 0;

-- The images a user message shows the model (a JSON array of references
-- into the media store), so a retry reads them again.
ALTER TABLE messages ADD COLUMN attachments TEXT;

-- Files kept in <data_dir>/media by the SHA-256 of their content, with
-- the text read from them (a document's text, a voice note's
-- transcript) once it was made.
CREATE TABLE media (
    sha256     TEXT    PRIMARY KEY,
    mime       TEXT    NOT NULL,
    size       INTEGER NOT NULL,
    text       TEXT,
    created_at INTEGER NOT NULL,
    used_at    INTEGER NOT NULL
);
CREATE INDEX media_used ON media (used_at);

-- Which platform file was stored as which content: a retried message is
-- not downloaded again.
CREATE TABLE media_sources (
    source     TEXT    PRIMARY KEY,
    sha256     TEXT    NOT NULL REFERENCES media (sha256) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
);
