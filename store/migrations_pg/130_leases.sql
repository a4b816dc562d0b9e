-- Leases for singleton work: see store/migrations/130_leases.sql.
CREATE TABLE leases (
    name    TEXT   COLLATE "C" PRIMARY KEY,
    holder  TEXT   NOT NULL DEFAULT '',
    epoch   BIGINT NOT NULL DEFAULT 0,
    expires BIGINT NOT NULL DEFAULT 0,
    data    BYTEA  NOT NULL DEFAULT '\x'
);
