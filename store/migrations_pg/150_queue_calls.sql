-- The queue's enqueue and finish in one round trip each, PostgreSQL
-- only (on SQLite each is one statement already; 150 in migrations only
-- keeps the numbers equal). Each function runs in the transaction of the
-- statement that calls it, so what it locks is held until that commits,
-- and each statement inside it, a VOLATILE function, reads what was
-- committed before that statement began (under READ COMMITTED, the
-- store's connections' default): after the conversation's lock is
-- taken, what the transaction that held it before committed.
--
-- lock_space is the first key of the conversations' advisory locks
-- (store.convLockSpace).

-- The enqueue was a transaction of four round trips: BEGIN, the
-- conversation's lock, the insert, COMMIT. The lock first, so the ids of
-- one conversation commit in order and the pending cap (max_pending;
-- <= 0 is none) counts what an enqueue before this one committed. It
-- returns the id, or NULL: a duplicate, or the conversation is full.
CREATE FUNCTION queue_enqueue(lock_space INT, p_dedupe_key TEXT, p_kind TEXT, p_conversation TEXT, p_payload TEXT,
                              p_not_before BIGINT, p_created_at BIGINT, p_updated_at BIGINT, max_pending BIGINT)
RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    new_id BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(lock_space, hashtext(p_conversation));
    INSERT INTO queue (dedupe_key, kind, conversation, payload, not_before, created_at, updated_at)
        SELECT p_dedupe_key, p_kind, p_conversation, p_payload, p_not_before, p_created_at, p_updated_at
        WHERE max_pending <= 0
           OR (SELECT COUNT(*) FROM queue WHERE conversation = p_conversation AND status IN ('queued', 'running')) < max_pending
        ON CONFLICT (dedupe_key) DO NOTHING
        RETURNING id INTO new_id;
    RETURN new_id;
END $$;

-- Finishing an item was a transaction of six round trips: BEGIN, the
-- reply part's delivery, the conversation's lock with the item's
-- conversation, its head row locked, the fenced update, COMMIT.
-- In the same order of locks as a claim and an enqueue: the
-- conversation's lock, then its head row. It returns TRUE when this
-- holder's claim (p_holder, p_lease) still held the item and it is now
-- p_status, FALSE when the lease was lost; with d_reply not NULL the
-- part (d_reply, d_part) is recorded as sent even then, unless the item
-- is gone.
CREATE FUNCTION queue_finish(lock_space INT, p_id BIGINT, p_holder TEXT, p_lease BIGINT, p_status TEXT, p_cause TEXT, p_updated_at BIGINT,
                             d_reply BIGINT, d_part INT, d_channel TEXT, d_platform_id TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    conv TEXT;
BEGIN
    SELECT q.conversation INTO conv FROM queue q
        CROSS JOIN LATERAL (SELECT pg_advisory_xact_lock(lock_space, hashtext(q.conversation))) l
        WHERE q.id = p_id;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    IF d_reply IS NOT NULL THEN
        INSERT INTO deliveries (reply_id, part, channel, platform_id, sent_at, draft)
            VALUES (d_reply, d_part, d_channel, d_platform_id, p_updated_at, FALSE)
            ON CONFLICT (reply_id, part) DO UPDATE SET platform_id = excluded.platform_id, sent_at = excluded.sent_at, draft = excluded.draft;
    END IF;
    PERFORM 1 FROM queue_heads WHERE conversation = conv FOR UPDATE;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    UPDATE queue SET status = p_status, attempts = attempts + 1, last_error = p_cause, holder = '', lease_until = 0, updated_at = p_updated_at
        WHERE id = p_id AND holder = p_holder AND lease = p_lease AND status = 'running';
    RETURN FOUND;
END $$;
