-- The replicas sharing this database, each recording itself at start and
-- at every heartbeat (the status page's replicas, and the warning when
-- they run different versions or configs). Times are unix ms.
CREATE TABLE replicas (
    id          TEXT    PRIMARY KEY,
    host        TEXT    NOT NULL DEFAULT '',
    version     TEXT    NOT NULL DEFAULT '',
    config_hash TEXT    NOT NULL DEFAULT '',
    started     INTEGER NOT NULL,
    heartbeat   INTEGER NOT NULL,
    stopped     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Operator notices decided once for the cluster: the first replica to
-- claim a key sends it; the others hold back until it ends.
CREATE TABLE notices (
    key   TEXT    PRIMARY KEY,
    until INTEGER NOT NULL
) WITHOUT ROWID;
