-- The history's read (sessions.go, historyFrom) takes the session's
-- summaries and its newest entries. messages_session found the summaries
-- only by reading every entry of the session, each from the table: a
-- cost that grew with the session on every message. The summaries get a
-- partial index of their own, written only when a summary is.
CREATE INDEX messages_summary ON messages (session_id, id) WHERE summary = TRUE;
