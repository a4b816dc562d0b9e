-- The router's learning state beside the affinity rows (issue 28), so a
-- restart or another replica continues what the router was noticing.
-- One row per (task type, model) arm; task_type '' is the model across
-- every task type. Times are unix milliseconds (0 = unset).
CREATE TABLE router_arms (
    task_type    TEXT    NOT NULL,
    model        TEXT    NOT NULL,
    drop_llr     REAL    NOT NULL DEFAULT 0,
    drop_ref     REAL    NOT NULL DEFAULT 0,
    drop_pos     REAL    NOT NULL DEFAULT 0,
    drop_neg     REAL    NOT NULL DEFAULT 0,
    rise_llr     REAL    NOT NULL DEFAULT 0,
    rise_ref     REAL    NOT NULL DEFAULT 0,
    rise_pos     REAL    NOT NULL DEFAULT 0,
    rise_neg     REAL    NOT NULL DEFAULT 0,
    pool_pos     REAL    NOT NULL DEFAULT 0,
    pool_neg     REAL    NOT NULL DEFAULT 0,
    seq_active   BOOLEAN NOT NULL DEFAULT FALSE,
    seq_p0       REAL    NOT NULL DEFAULT 0,
    seq_p1       REAL    NOT NULL DEFAULT 0,
    seq_llr      REAL    NOT NULL DEFAULT 0,
    seq_pos      REAL    NOT NULL DEFAULT 0,
    seq_neg      REAL    NOT NULL DEFAULT 0,
    seq_n        INTEGER NOT NULL DEFAULT 0,
    seq_seen     INTEGER NOT NULL DEFAULT 0,
    last_probe   BIGINT  NOT NULL DEFAULT 0,
    settled_vs   TEXT    NOT NULL DEFAULT '',
    settled_at   BIGINT  NOT NULL DEFAULT 0,
    change_at    BIGINT  NOT NULL DEFAULT 0,
    change_dir   INTEGER NOT NULL DEFAULT 0,
    change_scope TEXT    NOT NULL DEFAULT '',
    updated_at   BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (task_type, model)
);

-- One row per task type: the probe budget, the decayed count of learned
-- choices (the horizon of the value of information) and the incumbent.
CREATE TABLE router_tasks (
    task_type    TEXT   NOT NULL PRIMARY KEY,
    probe_tokens REAL   NOT NULL DEFAULT 0,
    probe_cost   REAL   NOT NULL DEFAULT 0,
    choices      REAL   NOT NULL DEFAULT 0,
    choices_at   BIGINT NOT NULL DEFAULT 0,
    first_seen   BIGINT NOT NULL DEFAULT 0,
    incumbent    TEXT   NOT NULL DEFAULT '',
    updated_at   BIGINT NOT NULL DEFAULT 0
);

-- The sweep for answers nothing followed (Router.SweepAbandoned) reads
-- replies by time.
CREATE INDEX replies_created ON replies (created_at);
