-- Leases for singleton work (the scheduler, maintenance, a Telegram
-- poller, a Discord shard, a Slack socket slot): one row per role. holder
-- names the replica that holds it until expires (unix ms) unless renewed;
-- epoch is bumped whenever the lease changes hands (or its holder comes
-- back after letting it run out), so a write fenced by the epoch from an
-- earlier term changes nothing. data is the role's small state handed
-- from one holder to the next (a poller's offset, a shard's session).
CREATE TABLE leases (
    name    TEXT    PRIMARY KEY,
    holder  TEXT    NOT NULL DEFAULT '',
    epoch   INTEGER NOT NULL DEFAULT 0,
    expires INTEGER NOT NULL DEFAULT 0,
    data    BLOB    NOT NULL DEFAULT X''
) WITHOUT ROWID;
