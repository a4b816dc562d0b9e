-- The queue for many claimers: see store/migrations/120_queue_leases.sql.
ALTER TABLE queue ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE queue ADD COLUMN lease BIGINT NOT NULL DEFAULT 0;
ALTER TABLE queue ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;

CREATE TABLE queue_heads (
    conversation TEXT   COLLATE "C" PRIMARY KEY,
    head         BIGINT NOT NULL,
    due          BIGINT NOT NULL
);

-- A new head is new work for every replica: they are notified (at
-- commit) on opentalon_queue.
CREATE FUNCTION queue_heads_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queue_heads (conversation, head, due) VALUES (NEW.conversation, NEW.id, NEW.not_before)
        ON CONFLICT (conversation) DO NOTHING;
    IF FOUND THEN
        PERFORM pg_notify('opentalon_queue', '');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER queue_heads_insert AFTER INSERT ON queue FOR EACH ROW
    WHEN (NEW.status IN ('queued', 'running')) EXECUTE FUNCTION queue_heads_insert();

CREATE FUNCTION queue_heads_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queue_heads SET due = NEW.not_before WHERE conversation = NEW.conversation AND head = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER queue_heads_due AFTER UPDATE OF not_before ON queue FOR EACH ROW
    WHEN (NEW.not_before <> OLD.not_before AND NEW.status IN ('queued', 'running')) EXECUTE FUNCTION queue_heads_due();

CREATE FUNCTION queue_heads_advance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queue_heads WHERE conversation = NEW.conversation AND head = NEW.id;
    INSERT INTO queue_heads (conversation, head, due)
        SELECT conversation, id, not_before FROM queue
        WHERE conversation = NEW.conversation AND status IN ('queued', 'running') ORDER BY id LIMIT 1
        ON CONFLICT (conversation) DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER queue_heads_advance AFTER UPDATE OF status ON queue FOR EACH ROW
    WHEN (NEW.status NOT IN ('queued', 'running') AND OLD.status IN ('queued', 'running')) EXECUTE FUNCTION queue_heads_advance();

INSERT INTO queue_heads (conversation, head, due)
    SELECT q.conversation, q.id, q.not_before
    FROM queue q
    WHERE q.id IN (SELECT MIN(id) FROM queue WHERE status IN ('queued', 'running') GROUP BY conversation);
