-- No query reads the signals by time (they are read by reply and by
-- request: signals_reply, signals_request), and every signal wrote the
-- index. 180 in migrations (SQLite) also makes deliveries a WITHOUT
-- ROWID table, which a PostgreSQL heap has no counterpart of.
DROP INDEX signals_at;
