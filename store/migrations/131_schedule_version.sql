-- A counter bumped by every change to schedules, so the scheduler of the
-- replica that fires them sees within a tick that another replica added,
-- changed or deleted one (a chat command, a plugin, the config) and reads
-- them again.
CREATE TABLE schedule_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO schedule_version (id, version) VALUES (1, 0);
CREATE TRIGGER schedules_version_insert AFTER INSERT ON schedules BEGIN
    UPDATE schedule_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER schedules_version_update AFTER UPDATE ON schedules BEGIN
    UPDATE schedule_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER schedules_version_delete AFTER DELETE ON schedules BEGIN
    UPDATE schedule_version SET version = version + 1 WHERE id = 1;
END;
