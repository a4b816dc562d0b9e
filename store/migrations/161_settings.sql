-- Values admins set in chat (/budget, /allowed) that override the config
-- key they are named after until /budget default or /allowed default
-- drops them. Every replica's router re-reads them (a few rows) with the
-- auth profiles' shared state. updated_at is unix ms.
CREATE TABLE settings (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;
