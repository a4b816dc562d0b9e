-- Keys and bytes (key + value) of each Lua script's ctx.kv namespace,
-- kept by a trigger as plugin_state_usage is (see 193 in migrations).
CREATE TABLE lua_kv_usage (
    script TEXT   COLLATE "C" PRIMARY KEY,
    keys   BIGINT NOT NULL,
    bytes  BIGINT NOT NULL
);

INSERT INTO lua_kv_usage (script, keys, bytes)
    SELECT script, COUNT(*), SUM(octet_length(key) + octet_length(value))
    FROM lua_kv GROUP BY script;

CREATE FUNCTION lua_kv_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE lua_kv_usage u
            SET keys = u.keys - 1, bytes = u.bytes - (octet_length(OLD.key) + octet_length(OLD.value))
            WHERE u.script = OLD.script;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO lua_kv_usage AS u (script, keys, bytes)
            VALUES (NEW.script, 1, octet_length(NEW.key) + octet_length(NEW.value))
            ON CONFLICT (script) DO UPDATE SET keys = u.keys + 1, bytes = u.bytes + EXCLUDED.bytes;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER lua_kv_usage AFTER INSERT OR UPDATE OR DELETE ON lua_kv
    FOR EACH ROW EXECUTE FUNCTION lua_kv_usage();
