-- A plugin name belongs to the binary that first registered it (path and
-- SHA-256 of its content): another binary declaring the name is refused,
-- so it can never reach that plugin's state.
CREATE TABLE plugin_binding (
    name     TEXT    PRIMARY KEY,
    path     TEXT    NOT NULL,
    sha256   TEXT    NOT NULL,
    bound_at INTEGER NOT NULL -- unix ms
) WITHOUT ROWID;

-- Keys and bytes (key + value) of each plugin's state, kept by triggers
-- so a quota check reads one row instead of the whole namespace.
CREATE TABLE plugin_state_usage (
    plugin_id TEXT    PRIMARY KEY,
    keys      INTEGER NOT NULL,
    bytes     INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO plugin_state_usage (plugin_id, keys, bytes)
    SELECT plugin_id, COUNT(*), SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB)))
    FROM plugin_state GROUP BY plugin_id;

CREATE TRIGGER plugin_state_usage_insert AFTER INSERT ON plugin_state BEGIN
    INSERT INTO plugin_state_usage (plugin_id, keys, bytes)
        VALUES (NEW.plugin_id, 1, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
        ON CONFLICT (plugin_id) DO UPDATE SET keys = keys + 1, bytes = bytes + excluded.bytes;
END;

CREATE TRIGGER plugin_state_usage_update AFTER UPDATE ON plugin_state BEGIN
    UPDATE plugin_state_usage
        SET bytes = bytes - (length(CAST(OLD.key AS BLOB)) + length(CAST(OLD.value AS BLOB)))
        WHERE plugin_id = OLD.plugin_id;
    INSERT INTO plugin_state_usage (plugin_id, keys, bytes)
        VALUES (NEW.plugin_id, 0, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
        ON CONFLICT (plugin_id) DO UPDATE SET bytes = bytes + excluded.bytes;
    UPDATE plugin_state_usage SET keys = keys - 1 WHERE plugin_id = OLD.plugin_id AND OLD.plugin_id <> NEW.plugin_id;
    UPDATE plugin_state_usage SET keys = keys + 1 WHERE plugin_id = NEW.plugin_id AND OLD.plugin_id <> NEW.plugin_id;
END;

CREATE TRIGGER plugin_state_usage_delete AFTER DELETE ON plugin_state BEGIN
    UPDATE plugin_state_usage
        SET keys = keys - 1, bytes = bytes - (length(CAST(OLD.key AS BLOB)) + length(CAST(OLD.value AS BLOB)))
        WHERE plugin_id = OLD.plugin_id;
END;
