-- The queue for many claimers: see store/migrations/120_queue_leases.sql.
ALTER TABLE queue ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE queue ADD COLUMN lease BIGINT NOT NULL DEFAULT 0;
ALTER TABLE queue ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;

CREATE TABLE queue_heads (
    conversation TEXT    COLLATE "C" PRIMARY KEY,
    head         BIGINT  NOT NULL,
    running      BOOLEAN NOT NULL DEFAULT FALSE,
    due          BIGINT  NOT NULL
);
CREATE INDEX queue_heads_due ON queue_heads (due, head);

INSERT INTO queue_heads (conversation, head, running, due)
    SELECT q.conversation, q.id, q.status = 'running', CASE WHEN q.status = 'running' THEN 0 ELSE q.not_before END
    FROM queue q
    WHERE q.id IN (SELECT MIN(id) FROM queue WHERE status IN ('queued', 'running') GROUP BY conversation);
