-- The queue for many claimers (the same design on PostgreSQL, 120 in
-- migrations_pg). A claim is a lease: holder names the claimer (a
-- replica), lease is the claim's fencing token (bumped by every claim, so
-- a claimer that lost its lease cannot finish, retry or defer the item),
-- lease_until when it ends unless renewed.
ALTER TABLE queue ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE queue ADD COLUMN lease INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;

-- One row per conversation with unfinished work: its oldest unfinished
-- item (head), whether that runs, and due: when the head may be claimed
-- (its not_before), or, while it runs, when its lease ends (then another
-- claimer takes it back). A claim reads the due heads off queue_heads_due
-- instead of grouping every pending row by conversation.
CREATE TABLE queue_heads (
    conversation TEXT    PRIMARY KEY,
    head         INTEGER NOT NULL,
    running      INTEGER NOT NULL DEFAULT 0,
    due          INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX queue_heads_due ON queue_heads (due, head);

-- A row left running by an older release has no lease: due at once, and
-- taken back as an interruption.
INSERT INTO queue_heads (conversation, head, running, due)
    SELECT q.conversation, q.id, q.status = 'running', CASE WHEN q.status = 'running' THEN 0 ELSE q.not_before END
    FROM queue q
    WHERE q.id IN (SELECT MIN(id) FROM queue WHERE status IN ('queued', 'running') GROUP BY conversation);

-- Statements are written once for both engines, with TRUE and FALSE; a
-- partial index serves a query only when its condition is spelled the
-- same way.
DROP INDEX sessions_active;
CREATE UNIQUE INDEX sessions_active ON sessions (conversation) WHERE active = TRUE;
DROP INDEX memories_shared;
CREATE INDEX memories_shared ON memories (id) WHERE shared = TRUE;
