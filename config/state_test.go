package config

import (
	"strings"
	"testing"
	"time"
)

func TestStateDriver(t *testing.T) {
	cfg, err := Load(writeConfig(t, minimal), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	pg := cfg.State.Postgres
	if cfg.State.Driver != DriverSQLite || pg.PoolSize != 10 || pg.StatementTimeout.D() != 30*time.Second || pg.ConnectWait != 0 || pg.DSN.IsSet() {
		t.Fatalf("defaults: driver %q, postgres %+v; want sqlite, pool 10, 30s, wait 1m, no DSN", cfg.State.Driver, pg)
	}
	if cfg.Queue.LeaseTTL.D() != 30*time.Second {
		t.Fatalf("default queue.lease_ttl = %s, want 30s", cfg.Queue.LeaseTTL)
	}

	const dsn = "postgres://bot:hunter2@db.example:5432/opentalon"
	body := minimal + "state:\n  driver: postgres\n  postgres:\n    dsn: \"${OPENTALON_POSTGRES_DSN}\"\n    pool_size: 4\n    statement_timeout: 5s\n    connect_wait: 0\nqueue:\n  lease_ttl: 10s\n"
	cfg, err = Load(writeConfig(t, body), MapEnv(map[string]string{"OPENTALON_POSTGRES_DSN": dsn}))
	if err != nil {
		t.Fatal(err)
	}
	pg = cfg.State.Postgres
	if cfg.State.Driver != DriverPostgres || pg.DSN.Value() != dsn || pg.PoolSize != 4 || pg.StatementTimeout.D() != 5*time.Second || pg.ConnectWait != 0 || cfg.Queue.LeaseTTL.D() != 10*time.Second {
		t.Fatalf("postgres: driver %q, pool %d, timeout %s, wait %s, lease %s", cfg.State.Driver, pg.PoolSize, pg.StatementTimeout, pg.ConnectWait, cfg.Queue.LeaseTTL)
	}
	if out := cfg.Redacted(); strings.Contains(out, "hunter2") || !strings.Contains(out, "dsn: '***'") {
		t.Fatalf("the printed config shows the DSN:\n%s", out)
	}

	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"unknown driver", "state:\n  driver: postgresql\n", []string{"config.yaml:10", "state.driver", `"postgresql" is not a driver`, "sqlite", `did you mean "postgres"`}},
		{"postgres without a DSN", "state:\n  driver: postgres\n", []string{"state.postgres.dsn", "required with state.driver: postgres", "OPENTALON_POSTGRES_DSN"}},
		{"empty DSN from the environment", "state:\n  driver: postgres\n  postgres: { dsn: \"${NOPE:-}\" }\n", []string{"state.postgres.dsn", "required"}},
		{"no pool", "state:\n  postgres: { pool_size: 0 }\n", []string{"state.postgres.pool_size", "at least 1"}},
		{"tiny statement timeout", "state:\n  postgres: { statement_timeout: 10ms }\n", []string{"state.postgres.statement_timeout", "below a second"}},
		{"negative statement timeout", "state:\n  postgres: { statement_timeout: -1s }\n", []string{"state.postgres.statement_timeout", "must not be negative"}},
		{"negative connect wait", "state:\n  postgres: { connect_wait: -1s }\n", []string{"state.postgres.connect_wait", "must not be negative"}},
		{"short lease", "queue:\n  lease_ttl: 500ms\n", []string{"queue.lease_ttl", "at least \"1s\""}},
		{"short cluster lease", "cluster:\n  lease_ttl: 500ms\n", []string{"cluster.lease_ttl", "at least \"1s\""}},
		{"unknown key", "state:\n  postgres: { url: x }\n", []string{"url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, minimal+tc.body), noEnv())
			if err == nil {
				t.Fatal("no error")
			}
			mustContain(t, err.Error(), tc.want...)
		})
	}
}

// TestStateSealKey: state.seal_key is a secret (never printed) and a
// short one is refused, naming the key and how to make one.
func TestStateSealKey(t *testing.T) {
	const key = "c2VhbC1rZXktZm9yLXRlc3RzLW9ubHktMzItYnl0ZXM="
	cfg, err := Load(writeConfig(t, minimal+"state:\n  seal_key: \"${OPENTALON_SEAL_KEY}\"\n"), MapEnv(map[string]string{"OPENTALON_SEAL_KEY": key}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State.SealKey.Value() != key {
		t.Fatalf("state.seal_key = %q", cfg.State.SealKey.Value())
	}
	if out := cfg.Redacted(); strings.Contains(out, key) {
		t.Fatalf("the printed config shows the seal key:\n%s", out)
	}
	_, err = Load(writeConfig(t, minimal+"state:\n  seal_key: short\n"), noEnv())
	if len(problemsOf(t, err)) != 1 {
		t.Fatalf("want 1 problem, got %v", err)
	}
	mustContain(t, err.Error(), "state.seal_key", "openssl rand")
}

// Short leases are allowed down to a second (fast failover in tests or a
// small cluster): both lease keys accept "1s".
func TestShortLeasesDownToASecond(t *testing.T) {
	cfg, err := Load(writeConfig(t, minimal+"cluster:\n  lease_ttl: 1s\nqueue:\n  lease_ttl: 1s\n"), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.LeaseTTL.D() != time.Second || cfg.Queue.LeaseTTL.D() != time.Second {
		t.Fatalf("cluster.lease_ttl %s, queue.lease_ttl %s; want 1s each", cfg.Cluster.LeaseTTL, cfg.Queue.LeaseTTL)
	}
}

// A config that leaves state.postgres.dsn out takes OPENTALON_POSTGRES_DSN,
// as examples/config.yaml's dsn: "${OPENTALON_POSTGRES_DSN:-}" says; a
// config that gives the key keeps its own value, even an empty one.
func TestPostgresDSNFromTheEnvironment(t *testing.T) {
	const fromEnv = "postgres://bot:from-env@db.example:5432/opentalon"
	env := MapEnv(map[string]string{"OPENTALON_POSTGRES_DSN": fromEnv, "OWN_DSN": "postgres://own@db.example/own"})
	for _, tc := range []struct {
		name, body string
		want       string // "" = a problem naming state.postgres.dsn
	}{
		{"left out", "state:\n  driver: postgres\n", fromEnv},
		{"left out, postgres section given", "state:\n  driver: postgres\n  postgres: { pool_size: 3 }\n", fromEnv},
		{"given", "state:\n  driver: postgres\n  postgres:\n    dsn: \"${OWN_DSN}\"\n", "postgres://own@db.example/own"},
		{"given empty", "state:\n  driver: postgres\n  postgres: { dsn: \"${NOPE:-}\" }\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(writeConfig(t, minimal+tc.body), env)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("no error; DSN %q", cfg.State.Postgres.DSN.Value())
				}
				mustContain(t, err.Error(), "state.postgres.dsn", "required")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.State.Postgres.DSN.Value(); got != tc.want {
				t.Fatalf("DSN %q, want %q", got, tc.want)
			}
			if out := cfg.Redacted(); strings.Contains(out, "from-env") {
				t.Fatalf("the printed config shows the DSN:\n%s", out)
			}
		})
	}
}
