-- See store/migrations/131_schedule_version.sql.
CREATE TABLE schedule_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT  NOT NULL
);
INSERT INTO schedule_version (id, version) VALUES (1, 0);
CREATE FUNCTION schedules_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE schedule_version SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END $$;
CREATE TRIGGER schedules_version AFTER INSERT OR UPDATE OR DELETE ON schedules
    FOR EACH STATEMENT EXECUTE FUNCTION schedules_version_bump();
