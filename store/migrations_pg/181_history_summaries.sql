-- The history's read takes the session's summaries and its newest
-- entries: the summaries get a partial index of their own (181 in
-- migrations), written only when a summary is.
CREATE INDEX messages_summary ON messages (session_id, id) WHERE summary = TRUE;
