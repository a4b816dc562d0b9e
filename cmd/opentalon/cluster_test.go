package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestReplicasHandOverOnShutdown: two gateways on one PostgreSQL
// database. The first holds the scheduler and maintenance leases, the
// status page lists both replicas and who holds what; a graceful stop of
// the first hands both leases to the second in about a second, far less
// than cluster.lease_ttl (30s here), and records the first as stopped.
func TestReplicasHandOverOnShutdown(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	dsn := pgtest.DSN(t)
	start := func(id string) *harness {
		extra := fmt.Sprintf("cluster:\n  replica_id: %s\n  lease_ttl: 30s\n  heartbeat: 200ms\n", id)
		cfg := parseConfig(t, insertUnder(testConfig(t.TempDir(), fake.URL, extra), "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn)))
		return startApp(t, cfg)
	}
	holds := func(h *harness, names ...string) bool {
		held := h.app.elector.HeldNames()
		for _, n := range names {
			if !slices.Contains(held, n) {
				return false
			}
		}
		return true
	}
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within %s: %s", within, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	a := start("replica-a")
	waitFor("replica-a holds the scheduler and maintenance leases", 20*time.Second, func() bool { return holds(a, "scheduler", maintenanceLease) })
	b := start("replica-b")
	waitFor("both replicas recorded", 20*time.Second, func() bool {
		c, err := b.app.statusCluster(context.Background())
		return err == nil && len(c.Replicas) == 2
	})
	c, err := b.app.statusCluster(context.Background())
	if err != nil || c.Replica != "replica-b" || len(c.Warnings) != 0 {
		t.Fatalf("cluster as replica-b sees it: %+v, %v", c, err)
	}
	for _, l := range c.Leases {
		if (l.Name == "scheduler" || l.Name == maintenanceLease) && (!l.Held || l.Holder != "replica-a") {
			t.Fatalf("lease %+v; want held by replica-a", l)
		}
	}
	if len(b.app.elector.HeldNames()) != 0 || !a.app.holdsMaintenance() || b.app.holdsMaintenance() {
		t.Fatalf("replica-b holds %v while replica-a runs", b.app.elector.HeldNames())
	}

	stopped := time.Now()
	a.shutdown()
	waitFor("replica-b takes over both leases", 10*time.Second, func() bool { return holds(b, "scheduler", maintenanceLease) })
	t.Logf("handover took %s (cluster.lease_ttl 30s)", time.Since(stopped).Round(time.Millisecond))
	c, err = b.app.statusCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Replicas {
		if r.ID == "replica-a" && r.Stopped.IsZero() {
			t.Fatalf("replica-a not recorded as stopped: %+v", r)
		}
	}
}

// The replicas' config hash leaves out what is each replica's own (the
// status page's "different configs" warning would otherwise fire on
// replicas that must differ), and nothing else.
func TestConfigHashLeavesOutEachReplicasOwn(t *testing.T) {
	base := testConfig("/var/lib/opentalon", "http://127.0.0.1:1/v1", `channels:
  console: { enabled: false }
  telegram: { enabled: true, token: "1:x", mode: webhook, webhook: { listen: "127.0.0.1:8081", url: "https://bot.example/tg", secret: "s3cret" } }
  slack: { enabled: true, bot_token: "xoxb-1", signing_secret: "s", mode: events, events: { listen: "127.0.0.1:9091" } }
queue: { workers: 8 }
`)
	base = insertUnder(base, "state", "  seal_key: \"0123456789abcdef-seal\"\n")
	want := configHash(parseConfig(t, base))
	for _, tt := range []struct {
		name, from, to string
		same           bool
	}{
		{"another data directory", "/var/lib/opentalon", "/srv/r2", true},
		{"another webhook listener", "127.0.0.1:8081", "127.0.0.1:8082", true},
		{"another events listener", "127.0.0.1:9091", "127.0.0.1:9092", true},
		{"the console on", "console: { enabled: false }", "console: { enabled: true }", true},
		{"more workers", "workers: 8", "workers: 9", false},
		{"another webhook URL", "https://bot.example/tg", "https://bot.example/other", false},
		// Tokens print as *** yet name the bot: another token is another
		// bot (counted under state.seal_key).
		{"another Telegram token", `token: "1:x"`, `token: "2:y"`, false},
		{"another Slack bot token", "xoxb-1", "xoxb-2", false},
		// The seal key keys the hash: without it nobody can test a guess
		// of a token against a hash the database, log or status page shows.
		{"another seal key", "0123456789abcdef-seal", "0123456789abcdef-other", false},
	} {
		got := configHash(parseConfig(t, strings.Replace(base, tt.from, tt.to, 1)))
		if (got == want) != tt.same {
			t.Errorf("%s: hash %s vs %s; same = %v, want %v", tt.name, got, want, got == want, tt.same)
		}
	}
}

// TestReplicaSaysItRunsAnotherConfig: a replica started next to a running
// one says in its log, at start, when its config differs (another model
// setting; another Telegram token, which prints as *** and is another
// bot), naming the other replica; a replica of the same config with its
// own data directory and name says nothing.
func TestReplicaSaysItRunsAnotherConfig(t *testing.T) {
	t.Parallel()
	const warning = "this replica runs another config than the running replicas"
	const otherToken = "654321:tg-OTHER-token-value"
	for _, tt := range []struct {
		name   string
		change func(string) string
		warn   bool
	}{
		{"the same config", func(y string) string { return y }, false},
		{"another context window", func(y string) string { return strings.Replace(y, "context_window: 8000", "context_window: 16000", 1) }, true},
		{"another Telegram token", func(y string) string { return strings.Replace(y, tgToken, otherToken, 1) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.DSN(t)
			llm := providertest.NewOpenAI(t)
			// One api_url for both bots, as on the real Telegram: the
			// path's token picks the fake.
			bots := map[string]*telegramtest.Server{tgToken: telegramtest.New(t, tgToken), otherToken: telegramtest.New(t, otherToken)}
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for tok, bot := range bots {
					if strings.Contains(r.URL.Path, tok) {
						u, _ := url.Parse(bot.URL)
						httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
						return
					}
				}
				http.NotFound(w, r)
			}))
			t.Cleanup(api.Close)
			start := func(id string, change func(string) string) *lockedBuf {
				y := telegramConfig(t.TempDir(), llm.BaseURL(), api.URL)
				// The tokens count in the hash under a seal key only.
				y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n  seal_key: \"0123456789abcdef-seal\"\n", dsn))
				y += fmt.Sprintf("cluster:\n  replica_id: %s\n", id)
				logs := &lockedBuf{}
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("%s's log:\n%s", id, logs.String())
					}
				})
				startAppWith(t, parseConfig(t, change(y)), AppOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
				// "opentalon running" comes after the replica's record
				// and the comparison with the others.
				for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "opentalon running"); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%s never ran", id)
					}
				}
				return logs
			}
			a := start("replica-a", func(y string) string { return y })
			b := start("replica-b", tt.change)
			got := b.String()
			if strings.Contains(got, warning) != tt.warn {
				t.Errorf("the second replica warns: %v, want %v", strings.Contains(got, warning), tt.warn)
			}
			if tt.warn && !strings.Contains(got, "replica-a (config ") {
				t.Errorf("the warning does not name the other replica")
			}
			if strings.Contains(got, otherToken) || strings.Contains(a.String(), tgToken) {
				t.Errorf("a log shows a token")
			}
		})
	}
}

// TestStartWarningComparesConfigsOfOneRelease: the config hash is taken
// over the effective config as a release prints it, so the same file
// hashes differently under another release (a key added with its
// default, or this hash's own change). During a rolling deploy the new
// replica must not warn that it runs another config than the old ones;
// it notes their other release. Running replicas of its own release with
// another config are still named, and stopped ones are not.
func TestStartWarningComparesConfigsOfOneRelease(t *testing.T) {
	t.Parallel()
	const warning = "this replica runs another config"
	me := core.Replica{ID: "new-1", Host: "h1", Version: "1.5.0", ConfigHash: "aaaaaaaaaaaa"}
	for _, tt := range []struct {
		name   string
		others []core.Replica
		warn   string // the replica named in the warning; "" for none
	}{
		{"the same release and config", []core.Replica{{ID: "b", Version: "1.5.0", ConfigHash: "aaaaaaaaaaaa"}}, ""},
		{"the same release, another config", []core.Replica{{ID: "b", Version: "1.5.0", ConfigHash: "bbbbbbbbbbbb"}}, "b"},
		{"a rolling deploy: the old release", []core.Replica{{ID: "old-2", Version: "1.4.0", ConfigHash: "cccccccccccc"}, {ID: "old-3", Version: "1.4.0", ConfigHash: "cccccccccccc"}}, ""},
		{"a stopped replica", []core.Replica{{ID: "b", Version: "1.5.0", ConfigHash: "bbbbbbbbbbbb", Stopped: time.Unix(1, 0)}}, ""},
		{"both", []core.Replica{{ID: "old-2", Version: "1.4.0", ConfigHash: "cccccccccccc"}, {ID: "b", Version: "1.5.0", ConfigHash: "bbbbbbbbbbbb"}}, "b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &lockedBuf{}
			a := &App{log: slog.New(slog.NewTextHandler(logs, nil))}
			a.warnOtherConfigs(append(tt.others, me), me)
			got := logs.String()
			warned := strings.Contains(got, warning)
			if warned != (tt.warn != "") {
				t.Fatalf("warned: %v; want %v:\n%s", warned, tt.warn != "", got)
			}
			if warned && (!strings.Contains(got, tt.warn+" (config ") || strings.Contains(got, "old-2 (config")) {
				t.Errorf("the warning names the wrong replicas:\n%s", got)
			}
		})
	}
}

// TestConfigHashPublishesNothingOfATokenWithoutASealKey: the config hash
// is in the replicas table, the status page and the start warning.
// Without state.seal_key nothing keys it, so it must not depend on the
// channels' tokens: a hash of the config (which anyone with the file
// without its secrets can print) and a token lets a guess of the token be
// tested offline. With a seal key the tokens count, keyed by it.
func TestConfigHashPublishesNothingOfATokenWithoutASealKey(t *testing.T) {
	cfg := func(token, seal string) string {
		y := testConfig("/var/lib/opentalon", "http://127.0.0.1:1/v1", fmt.Sprintf(`channels:
  telegram: { enabled: true, token: %q, mode: webhook, webhook: { listen: "127.0.0.1:8081", url: "https://bot.example/tg", secret: "s3cret" } }
`, token))
		if seal != "" {
			y = insertUnder(y, "state", fmt.Sprintf("  seal_key: %q\n", seal))
		}
		return configHash(parseConfig(t, y))
	}
	if a, b := cfg("1:short", ""), cfg("1:other", ""); a != b {
		t.Errorf("without a seal key the hash depends on the token (%s vs %s): a guess of it can be tested against the replicas table", a, b)
	}
	const seal = "0123456789abcdef-seal"
	if a, b := cfg("1:short", seal), cfg("1:other", seal); a == b {
		t.Errorf("with a seal key another token gives the same hash %s", a)
	}
}
