-- See store/migrations/161_settings.sql.
CREATE TABLE settings (
    key        TEXT   COLLATE "C" PRIMARY KEY,
    value      TEXT   NOT NULL,
    updated_at BIGINT NOT NULL,
    updated_by TEXT   NOT NULL DEFAULT ''
);
