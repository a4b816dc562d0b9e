-- Fewer pages written per message: each B-tree a write touches is a page
-- appended to the write-ahead log (and copied again by the checkpoint).
-- deliveries becomes a WITHOUT ROWID table clustered on its primary key
-- (reply_id, part): a part recorded as sent then writes that one tree,
-- not a rowid table and the key's index beside it. signals_at goes: no
-- query reads the signals by time (they are read by reply and by
-- request, signals_reply and signals_request), and every signal wrote
-- it. 180 in migrations_pg drops signals_at too.
CREATE TABLE deliveries_copy (
    reply_id    INTEGER NOT NULL REFERENCES replies (id) ON DELETE CASCADE,
    part        INTEGER NOT NULL,
    channel     TEXT    NOT NULL,
    platform_id TEXT    NOT NULL,
    sent_at     INTEGER NOT NULL,
    draft       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (reply_id, part)
) WITHOUT ROWID;
INSERT INTO deliveries_copy (reply_id, part, channel, platform_id, sent_at, draft)
    SELECT reply_id, part, channel, platform_id, sent_at, draft FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_copy RENAME TO deliveries;
CREATE INDEX deliveries_platform ON deliveries (channel, platform_id);

DROP INDEX signals_at;
