-- See store/migrations/132_cluster.sql.
CREATE TABLE replicas (
    id          TEXT   COLLATE "C" PRIMARY KEY,
    host        TEXT   NOT NULL DEFAULT '',
    version     TEXT   NOT NULL DEFAULT '',
    config_hash TEXT   NOT NULL DEFAULT '',
    started     BIGINT NOT NULL,
    heartbeat   BIGINT NOT NULL,
    stopped     BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE notices (
    key   TEXT   COLLATE "C" PRIMARY KEY,
    until BIGINT NOT NULL
);
