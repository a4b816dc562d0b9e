-- Keys and bytes (key + value) of each Lua script's ctx.kv namespace,
-- kept by triggers as plugin_state_usage is, so the quota check of
-- plugins.lua.limits.kv_max_keys / kv_max_bytes reads one row.
CREATE TABLE lua_kv_usage (
    script TEXT    PRIMARY KEY,
    keys   INTEGER NOT NULL,
    bytes  INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO lua_kv_usage (script, keys, bytes)
    SELECT script, COUNT(*), SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB)))
    FROM lua_kv GROUP BY script;

CREATE TRIGGER lua_kv_usage_insert AFTER INSERT ON lua_kv BEGIN
    INSERT INTO lua_kv_usage (script, keys, bytes)
        VALUES (NEW.script, 1, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
        ON CONFLICT (script) DO UPDATE SET keys = keys + 1, bytes = bytes + excluded.bytes;
END;

CREATE TRIGGER lua_kv_usage_update AFTER UPDATE ON lua_kv BEGIN
    UPDATE lua_kv_usage
        SET bytes = bytes - (length(CAST(OLD.key AS BLOB)) + length(CAST(OLD.value AS BLOB)))
        WHERE script = OLD.script;
    INSERT INTO lua_kv_usage (script, keys, bytes)
        VALUES (NEW.script, 0, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
        ON CONFLICT (script) DO UPDATE SET bytes = bytes + excluded.bytes;
    UPDATE lua_kv_usage SET keys = keys - 1 WHERE script = OLD.script AND OLD.script <> NEW.script;
    UPDATE lua_kv_usage SET keys = keys + 1 WHERE script = NEW.script AND OLD.script <> NEW.script;
END;

CREATE TRIGGER lua_kv_usage_delete AFTER DELETE ON lua_kv BEGIN
    UPDATE lua_kv_usage
        SET keys = keys - 1, bytes = bytes - (length(CAST(OLD.key AS BLOB)) + length(CAST(OLD.value AS BLOB)))
        WHERE script = OLD.script;
END;
