-- Per-plugin key-value state. plugin_id is bound by the core to the
-- plugin's connection; a plugin never names it.
CREATE TABLE plugin_state (
    plugin_id  TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL, -- unix ms
    PRIMARY KEY (plugin_id, key)
) WITHOUT ROWID;
