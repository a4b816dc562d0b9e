-- The orchestration state of each session (core.SessionState as JSON):
-- the tools used recently, the model and auth profile of the latest
-- answer, the active orchestration step and its position, compactions.
ALTER TABLE sessions ADD COLUMN state TEXT NOT NULL DEFAULT '{}';
-- Sessions idle past state.session_ttl are found by their last access.
CREATE INDEX sessions_last_access ON sessions (last_access);
