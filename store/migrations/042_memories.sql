-- Long-term memory: facts saved for a user (or shared with every user by
-- an admin) and workflow patterns (tag "workflow": the trigger text in
-- content, the ordered plugin/action steps in steps). Ids are never
-- reused, so "/forget 12" cannot hit a newer memory.
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
);
CREATE INDEX memories_owner ON memories (owner, id);
CREATE INDEX memories_shared ON memories (id) WHERE shared = 1;
CREATE INDEX memories_request ON memories (request_id) WHERE request_id IS NOT NULL;

-- Full-text search over content and tags (FTS5, contentless: the text
-- lives in memories; the porter stemmer matches "analyze" with
-- "analyzing"). scope holds one token per owner ("u" and the owner's hex)
-- and "shared" for shared memories, so a search for one user only scores
-- that user's and the shared memories.
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

-- A rejection of an answer (a negative signal on its reply: 👎, /retry,
-- "no, try again", a rephrase) marks the workflow recorded with that
-- answer failed; taking a 👎 back (a positive reaction signal) restores it.
CREATE TRIGGER signals_judge_workflow AFTER INSERT ON signals
WHEN new.reply_id IS NOT NULL AND (new.polarity < 0 OR (new.polarity > 0 AND new.kind = 'reaction'))
BEGIN
    UPDATE memories SET outcome = CASE WHEN new.polarity < 0 THEN 'failed' ELSE 'success' END, updated_at = new.at
    WHERE outcome != '' AND request_id = (SELECT request_id FROM replies WHERE id = new.reply_id);
END;
