-- Nothing to change on SQLite: 150 in migrations_pg makes PostgreSQL's
-- enqueue and finish one round trip each (functions), which SQLite's
-- single-statement enqueue and finish already are. The number keeps both
-- engines' schema versions equal (opentalon copy-state requires it).
SELECT 1;
