-- The queue for many claimers (the same design on PostgreSQL, 120 in
-- migrations_pg). A claim is a lease: holder names the claimer (a
-- replica), lease is the claim's fencing token (bumped by every claim, so
-- a claimer that lost its lease cannot finish, retry or defer the item),
-- lease_until when it ends unless renewed.
ALTER TABLE queue ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE queue ADD COLUMN lease INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;

-- One row per conversation with unfinished work: its oldest unfinished
-- item (head) and when that may be claimed (due: its not_before). Whether
-- the head runs, and until when, is its own row's (status, lease_until),
-- so a claim or a renewal writes the item only. A claim reads the heads,
-- one row per busy conversation, instead of grouping every pending row by
-- conversation. The triggers below keep the table: an item that is the
-- first unfinished one of its conversation becomes its head; a retry or
-- deferral of the head moves its due time; a head that finishes passes on
-- to the next item.
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

-- A row left running by an older release has no lease (lease_until 0): it
-- is taken back at once, as an interruption.
INSERT INTO queue_heads (conversation, head, due)
    SELECT q.conversation, q.id, q.not_before
    FROM queue q
    WHERE q.id IN (SELECT MIN(id) FROM queue WHERE status IN ('queued', 'running') GROUP BY conversation);

-- Statements are written once for both engines, with TRUE and FALSE; a
-- partial index serves a query only when its condition is spelled the
-- same way.
DROP INDEX sessions_active;
CREATE UNIQUE INDEX sessions_active ON sessions (conversation) WHERE active = TRUE;
DROP INDEX memories_shared;
CREATE INDEX memories_shared ON memories (id) WHERE shared = TRUE;
