-- Per-script key-value state of the Lua hooks (ctx.kv_get / ctx.kv_set).
-- script is bound by the core to the script's file name; a script never
-- names it.
CREATE TABLE lua_kv (
    script     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL, -- unix ms
    PRIMARY KEY (script, key)
) WITHOUT ROWID;
