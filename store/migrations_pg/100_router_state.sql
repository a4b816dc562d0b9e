-- The router's learning state beside the affinity rows (issue 28): the
-- PostgreSQL twin of migrations/100_router_state.sql, translated by the
-- rules of 090_baseline.sql. One row per (task type, model) arm; task_type
-- '' is the model across every task type. Times are unix milliseconds
-- (0 = unset).
CREATE TABLE router_arms (
    task_type    TEXT    COLLATE "C" NOT NULL,
    model        TEXT    COLLATE "C" NOT NULL,
    drop_llr     DOUBLE PRECISION NOT NULL DEFAULT 0,
    drop_ref     DOUBLE PRECISION NOT NULL DEFAULT 0,
    drop_pos     DOUBLE PRECISION NOT NULL DEFAULT 0,
    drop_neg     DOUBLE PRECISION NOT NULL DEFAULT 0,
    rise_llr     DOUBLE PRECISION NOT NULL DEFAULT 0,
    rise_ref     DOUBLE PRECISION NOT NULL DEFAULT 0,
    rise_pos     DOUBLE PRECISION NOT NULL DEFAULT 0,
    rise_neg     DOUBLE PRECISION NOT NULL DEFAULT 0,
    pool_pos     DOUBLE PRECISION NOT NULL DEFAULT 0,
    pool_neg     DOUBLE PRECISION NOT NULL DEFAULT 0,
    seq_active   BOOLEAN NOT NULL DEFAULT FALSE,
    seq_p0       DOUBLE PRECISION NOT NULL DEFAULT 0,
    seq_p1       DOUBLE PRECISION NOT NULL DEFAULT 0,
    seq_llr      DOUBLE PRECISION NOT NULL DEFAULT 0,
    seq_pos      DOUBLE PRECISION NOT NULL DEFAULT 0,
    seq_neg      DOUBLE PRECISION NOT NULL DEFAULT 0,
    seq_n        BIGINT  NOT NULL DEFAULT 0,
    seq_seen     BIGINT  NOT NULL DEFAULT 0,
    last_probe   BIGINT  NOT NULL DEFAULT 0,
    settled_vs   TEXT    NOT NULL DEFAULT '',
    settled_at   BIGINT  NOT NULL DEFAULT 0,
    change_at    BIGINT  NOT NULL DEFAULT 0,
    change_dir   BIGINT  NOT NULL DEFAULT 0,
    change_scope TEXT    NOT NULL DEFAULT '',
    updated_at   BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (task_type, model)
);

-- One row per task type: the probe budget, the decayed count of learned
-- choices (the horizon of the value of information) and the incumbent.
CREATE TABLE router_tasks (
    task_type    TEXT    COLLATE "C" NOT NULL PRIMARY KEY,
    probe_tokens DOUBLE PRECISION NOT NULL DEFAULT 0,
    probe_cost   DOUBLE PRECISION NOT NULL DEFAULT 0,
    choices      DOUBLE PRECISION NOT NULL DEFAULT 0,
    choices_at   BIGINT  NOT NULL DEFAULT 0,
    first_seen   BIGINT  NOT NULL DEFAULT 0,
    incumbent    TEXT    NOT NULL DEFAULT '',
    updated_at   BIGINT  NOT NULL DEFAULT 0
);

-- The sweep for answers nothing followed (Router.SweepAbandoned) reads
-- replies by time.
CREATE INDEX replies_created ON replies (created_at);
