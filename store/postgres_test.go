package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store/pgtest"
)

// openPG opens a fresh PostgreSQL database (store/pgtest).
func openPG(t testing.TB, o Options) *DB {
	t.Helper()
	o.Postgres = &Postgres{DSN: pgtest.DSN(t)}
	db, err := Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// waitLockWaiters returns once n sessions of db's PostgreSQL database
// wait for a lock (a row's, a transaction's), or when ended is closed:
// the work that was to wait has finished without it, and the test's own
// checks say whether that was right. It fails the test after 10 seconds.
func waitLockWaiters(t testing.TB, db *DB, n int, ended <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := db.w.DB.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		select {
		case <-ended:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock after 10s; want %d", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPostgresStartupErrors: every way the DSN can be wrong is a start-up
// error naming state.postgres.dsn and the fix, never the password.
func TestPostgresStartupErrors(t *testing.T) {
	admin := pgtest.AdminDSN(t)
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	wrongPassword := *u
	wrongPassword.User = url.UserPassword(u.User.Username(), "not-"+password)
	closed := *u
	closed.Host = "127.0.0.1:1"
	tlsAsked := *u // the test server runs without TLS
	q := tlsAsked.Query()
	q.Set("sslmode", "require")
	tlsAsked.RawQuery = q.Encode()
	for _, tc := range []struct {
		name, dsn string
		want      []string
	}{
		{"not a DSN", "postgres://bot:s3cret-pw@db.example:port/x", []string{"state.postgres.dsn is not a PostgreSQL DSN", "postgres://USER:PASSWORD@HOST:5432/DATABASE"}},
		{"empty", "", []string{"state.postgres.dsn is empty"}},
		{"another scheme", "mysql://bot:s3cret-pw@db.example:3306/x", []string{"state.postgres.dsn is a mysql:// URL, not a PostgreSQL one", "postgres://USER:PASSWORD@HOST:5432/DATABASE"}},
		{"a typo in the scheme", "postgress://bot:s3cret-pw@db.example/x", []string{"state.postgres.dsn is a postgress:// URL", "postgres://USER:PASSWORD@HOST:5432/DATABASE"}},
		{"a bad sslmode", "postgres://bot:s3cret-pw@db.example/x?sslmode=bogus", []string{"state.postgres.dsn is not a PostgreSQL DSN", `the value of "sslmode" is wrong (it takes disable, allow, prefer, require, verify-full, or verify-ca)`}},
		{"a password with a space, unquoted, last", "host=db.example user=bot password=my s3cret-pw", []string{"state.postgres.dsn is not a PostgreSQL DSN", "password='my secret'"}},
		{"a password with a space, unquoted", "host=db.example user=bot password=s3cret port=pw", []string{"state.postgres.dsn is not a PostgreSQL DSN", `the value of "port" is wrong`, "password='…'"}},
		{"a bad escape in the password", "postgres://bot:s3cret%zz@db.example/x", []string{"state.postgres.dsn is not a PostgreSQL DSN", "write % in the password as %25"}},
		{"TLS asked of a server without it", tlsAsked.String(), []string{"does not take TLS", "sslmode=require", "state.postgres.dsn", "sslmode=disable"}},
		{"unreachable", closed.String(), []string{"cannot reach the PostgreSQL server at 127.0.0.1:1", "state.postgres.dsn", "connection refused"}},
		{"wrong password", wrongPassword.String(), []string{"refused the login of user \"postgres\"", "state.postgres.dsn", "check the user and password"}},
		{"missing database", pgtest.WithDatabase(admin, "no_such_db"), []string{"the database \"no_such_db\" does not exist", "state.postgres.dsn", "createdb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			db, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: tc.dsn}})
			if err == nil {
				db.Close()
				t.Fatal("opened")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.name != "unreachable" && core.ErrorKind(err) != core.KindInvalid && core.ErrorKind(err) != core.KindAuth {
				t.Errorf("error %q is of kind %v; a DSN only the operator can fix is invalid (exit status 78)", err, core.ErrorKind(err))
			}
			if n := strings.Count(err.Error(), "SSL is not enabled"); n > 1 {
				t.Errorf("error %q repeats the driver's text", err)
			}
			for _, secret := range []string{"s3cret-pw", `"pw"`, "s3cret%zz", "%zz", password, "not-" + password} {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows the password", err)
				}
			}
		})
	}
	t.Setenv("PGSSLMODE", "bogus")
	if _, err := parseDSN("postgres://bot:s3cret-pw@db.example/x"); err == nil || !strings.Contains(err.Error(), "$PGSSLMODE") || strings.Contains(err.Error(), "bogus") {
		t.Errorf("a bad PGSSLMODE: %v; want it named, without its value", err)
	}
	os.Unsetenv("PGSSLMODE")
	if err := checkVersion(130012); err == nil || !strings.Contains(err.Error(), "PostgreSQL 13.12, older than 14") || !strings.Contains(err.Error(), "state.postgres.dsn") {
		t.Errorf("a PostgreSQL 13 server: %v", err)
	}
	if err := checkVersion(90624); err == nil || !strings.Contains(err.Error(), "PostgreSQL 9.6.24, older than 14") {
		t.Errorf("9.6.24: %v", err)
	}
	if err := checkVersion(150004); err != nil {
		t.Errorf("PostgreSQL 15: %v", err)
	}
}

func TestPostgresNewerSchemaRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.DB.Exec(`INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}})
	if err == nil || !strings.Contains(err.Error(), "schema version 9999") || !strings.Contains(err.Error(), "newer release") || !strings.Contains(err.Error(), "state.postgres.dsn") || !strings.Contains(err.Error(), "pg_restore") {
		t.Fatalf("open of a newer database: %v", err)
	}
}

// TestPostgresMigratorsAtOnce: five processes start on one empty database
// at the same instant; one migrates, the others wait for it, and the
// schema ends up applied once.
func TestPostgresMigratorsAtOnce(t *testing.T) {
	if os.Getenv("OPENTALON_TEST_MIGRATE_DSN") != "" {
		t.Skip("the child process's run")
	}
	dsn := pgtest.DSN(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([][]byte, 5)
	errs := make([]error, 5)
	start := time.Now().Add(500 * time.Millisecond)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(exe, "-test.run=^TestPostgresMigrateChild$", "-test.v")
			cmd.Env = append(os.Environ(), "OPENTALON_TEST_MIGRATE_DSN="+dsn, fmt.Sprintf("OPENTALON_TEST_MIGRATE_AT=%d", start.UnixNano()))
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	applied := 0
	for i := range outs {
		if errs[i] != nil || !strings.Contains(string(outs[i]), "--- PASS: TestPostgresMigrateChild") {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
		applied += strings.Count(string(outs[i]), "applied database migration")
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, _ := loadMigrations("migrations_pg")
	var rows, distinct int
	if err := db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || distinct != len(ms) || applied != len(ms) {
		t.Fatalf("schema_migrations has %d rows (%d versions), the processes applied %d; want each of the %d migrations once", rows, distinct, applied, len(ms))
	}
}

// TestPostgresMigrateChild is one process of TestPostgresMigratorsAtOnce.
func TestPostgresMigrateChild(t *testing.T) {
	dsn := os.Getenv("OPENTALON_TEST_MIGRATE_DSN")
	if dsn == "" {
		t.Skip("run by TestPostgresMigratorsAtOnce")
	}
	var at int64
	fmt.Sscan(os.Getenv("OPENTALON_TEST_MIGRATE_AT"), &at)
	time.Sleep(time.Until(time.Unix(0, at)))
	var logs strings.Builder
	db, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if problems, err := db.QuickCheck(context.Background()); err != nil || len(problems) > 0 {
		t.Fatalf("check: %v %v", problems, err)
	}
	fmt.Print(logs.String())
}

// TestPostgresRefusesUnstorableText: PostgreSQL's TEXT cannot hold a NUL
// byte or invalid UTF-8; such a text is refused with an error that says
// so, and the transaction changes nothing.
func TestPostgresRefusesUnstorableText(t *testing.T) {
	db := openPG(t, Options{})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "telegram", Chat: "nul"}
	s, err := db.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"a\x00b", "caf\xe9"} {
		// The history entries are cleaned on the way in; the reply's own
		// text is its caller's to clean.
		_, err := db.SaveReply(ctx, &core.Reply{SessionID: s.ID, Conversation: conv, Text: text, Parts: []string{"ok"}},
			[]core.ChatMessage{{Role: core.RoleUser, Content: "question"}, {Role: core.RoleAssistant, Content: "ok"}})
		if core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), "NUL byte or is not valid UTF-8") {
			t.Fatalf("saving %q: %v; want KindInvalid naming the NUL byte / invalid UTF-8", text, err)
		}
		if _, err := db.Memories(ctx, core.MemoryQuery{Owner: text}); core.ErrorKind(err) != core.KindInvalid {
			t.Fatalf("a query with %q: %v; want KindInvalid", text, err)
		}
	}
	if n, _ := db.MessageCount(ctx, s.ID); n != 0 {
		t.Fatalf("a refused reply left %d history entries", n)
	}
	// A queued message with such a text round-trips: the payload is JSON.
	in := core.Inbound{Conversation: conv, MessageID: "1", Text: "a\x00b"}
	if _, _, err := db.Enqueue(ctx, core.QueueItem{Kind: core.EventMessage, Conversation: conv, DedupeKey: "nul:1", Message: &in}); err != nil {
		t.Fatal(err)
	}
	items, _, err := db.Claim(ctx, 1, time.Now())
	if err != nil || len(items) != 1 || items[0].Message.Text != "a\x00b" {
		t.Fatalf("claimed %+v, %v", items, err)
	}
}

func TestRebind(t *testing.T) {
	for q, want := range map[string]string{
		`SELECT ? FROM t WHERE a = ? AND b = '?' AND "c?" = ?`: `SELECT $1 FROM t WHERE a = $2 AND b = '?' AND "c?" = $3`,
		"SELECT 1 -- what?\nFROM t WHERE x = ?":                "SELECT 1 -- what?\nFROM t WHERE x = $1",
		`SELECT 'it''s ?', ?`:                                  `SELECT 'it''s ?', $1`,
		`SELECT 1`:                                             `SELECT 1`,
	} {
		if got := postgresDialect.rebind(q); got != want {
			t.Errorf("rebind(%q) = %q, want %q", q, got, want)
		}
		if got := sqliteDialect.rebind(q); got != q {
			t.Errorf("SQLite rebind changed %q", q)
		}
	}
}

// listeningReplicas opens two replicas' handles on one fresh PostgreSQL
// database, closed when the test ends, and returns once a's notification
// listener is connected (its first poke, which it takes).
func listeningReplicas(t *testing.T) (a, b *DB) {
	t.Helper()
	dsn := pgtest.DSN(t)
	open := func() *DB {
		db, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b = open(), open()
	wake := a.QueueWake()
	if wake == nil {
		t.Fatal("no wake channel on PostgreSQL")
	}
	select { // the poke once the listener is connected
	case <-wake:
	case <-time.After(15 * time.Second):
		t.Fatal("the listener never connected")
	}
	return a, b
}

// TestPostgresQueueWake: an enqueue through one replica's database wakes
// the other's dispatcher (LISTEN/NOTIFY on its own connection).
func TestPostgresQueueWake(t *testing.T) {
	ctx := context.Background()
	a, b := listeningReplicas(t)
	wake := a.QueueWake()
	conv := core.ConversationKey{Channel: "telegram", Chat: "wake"}
	if _, _, err := b.Enqueue(ctx, msgItem(conv, "1", "hi")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(15 * time.Second):
		t.Fatal("an enqueue on the other replica did not wake this one")
	}
}

// TestPostgresLocalConversationsStayWithTheirReplica: each replica's
// console conversation is claimed by that replica alone, the shared one
// by any replica with a console, one without a console claims none, and
// every other conversation is anyone's.
func TestPostgresLocalConversationsStayWithTheirReplica(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	open := func(own string) *DB {
		local := LocalConversation{Channel: "console"}
		if own != "" {
			local.Conversation, local.Shared = own, true
		}
		db, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}, Local: local})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b, none := open("console:local:a"), open("console:local:b"), open("")
	convA := core.ConversationKey{Channel: "console", Chat: "local", Thread: "a"}
	convB := core.ConversationKey{Channel: "console", Chat: "local", Thread: "b"}
	firing := core.ConversationKey{Channel: "console", Chat: "local"} // a schedule's, any console's
	ops := core.ConversationKey{Channel: "console", Chat: "ops"}      // a schedule naming another chat
	shared := core.ConversationKey{Channel: "telegram", Chat: "7"}
	for i, c := range []core.ConversationKey{convA, convB, firing, ops, shared} {
		if _, _, err := a.Enqueue(ctx, msgItem(c, strconv.Itoa(i), "hi")); err != nil {
			t.Fatal(err)
		}
	}
	claimed := func(db *DB) []string {
		t.Helper()
		items, _, err := db.Claim(ctx, 10, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var convs []string
		for _, it := range items {
			convs = append(convs, it.Conversation.String())
		}
		return convs
	}
	if got := claimed(none); !slices.Equal(got, []string{"telegram:7"}) {
		t.Errorf("a replica without a console claimed %v; want the Telegram chat only", got)
	}
	if got := claimed(b); !slices.Equal(got, []string{"console:local:b", "console:local", "console:ops"}) {
		t.Errorf("replica b claimed %v; want its own console and the shared ones", got)
	}
	if got := claimed(a); !slices.Equal(got, []string{"console:local:a"}) {
		t.Errorf("replica a claimed %v; want its own console only", got)
	}
}

// TestPostgresReplicasClaimOnlyTheirChannels: replicas whose configs run
// different channels (a rolling deploy that adds or drops one) each claim
// their own channels' items and leave the others' to the replicas that
// run them; an item no replica took for the channel wait is anyone's
// (to be failed, naming the channel).
func TestPostgresReplicasClaimOnlyTheirChannels(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	now := time.Now()
	open := func(channels ...string) *DB {
		db, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}, Channels: channels, ChannelWait: time.Minute, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	tg, slack := open("telegram"), open("slack", "console")
	for i, c := range []core.ConversationKey{{Channel: "telegram", Chat: "1"}, {Channel: "slack", Chat: "C1"}, {Channel: "discord", Chat: "9"}, {Channel: "telegram", Chat: "2"}} {
		if _, _, err := tg.Enqueue(ctx, msgItem(c, strconv.Itoa(i), "hi")); err != nil {
			t.Fatal(err)
		}
	}
	claimed := func(db *DB, at time.Time) []string {
		t.Helper()
		items, _, err := db.Claim(ctx, 10, at)
		if err != nil {
			t.Fatal(err)
		}
		var convs []string
		for _, it := range items {
			convs = append(convs, it.Conversation.String())
		}
		return convs
	}
	if got := claimed(slack, now); !slices.Equal(got, []string{"slack:C1"}) {
		t.Errorf("the Slack replica claimed %v; want the Slack chat only", got)
	}
	if got := claimed(tg, now); !slices.Equal(got, []string{"telegram:1", "telegram:2"}) {
		t.Errorf("the Telegram replica claimed %v; want the Telegram chats", got)
	}
	if got := claimed(slack, now.Add(30*time.Second)); len(got) != 0 {
		t.Errorf("the Slack replica claimed %v before the channel wait; want nothing", got)
	}
	if got := claimed(slack, now.Add(time.Minute+time.Second)); !slices.Equal(got, []string{"discord:9"}) {
		t.Errorf("the Slack replica claimed %v past the channel wait; want the Discord chat no replica runs", got)
	}
}

// TestWithDefaults: the listener's connection string gets the pool's
// defaults where the DSN names none, in either DSN form.
func TestWithDefaults(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u:p@h:5432/db", "postgres://u:p@h:5432/db?sslmode=prefer&connect_timeout=15&application_name=opentalon"},
		{"postgres://u:p@h/db?sslmode=disable&application_name=x", "postgres://u:p@h/db?sslmode=disable&application_name=x&connect_timeout=15"},
		{"host=h user=u connect_timeout=3", "host=h user=u connect_timeout=3 sslmode=prefer application_name=opentalon"},
	} {
		cfg, err := parseDSN(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		if got := withDefaults(tc.dsn, cfg); got != tc.want {
			t.Errorf("withDefaults(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
	if _, err := parseDSN("postgres://u@h/db?default_query_exec_mode=simple_protocol"); err == nil || !strings.Contains(err.Error(), "default_query_exec_mode") {
		t.Errorf("a client parameter pq does not know: %v", err)
	}
}

// TestPoolSizeCountsTheListener: state.postgres.pool_size bounds every
// connection a replica opens, the one that listens for new work
// (QueueWake) included, however many queries run at once.
func TestPoolSizeCountsTheListener(t *testing.T) {
	dsn := pgtest.DSN(t)
	db, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: dsn, PoolSize: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.QueueWake()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := db.w.ExecContext(context.Background(), `SELECT pg_sleep(0.3)`); err != nil {
				t.Error(err)
			}
		})
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	watch, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	// The most connections seen open at once while the queries run
	// (about 1.2 s: four rounds of two).
	most := 0
	for done := false; !done; {
		select {
		case <-ended:
			done = true
		case <-time.After(10 * time.Millisecond):
		}
		var n int
		if err := watch.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'opentalon' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
	}
	if most != 3 {
		t.Fatalf("at most %d connections open with pool_size 3 and eight queries at once; want 3 (two for the queries, one listening)", most)
	}
}

// TestPostgresQueueWakeAfterARestart: the server goes away and comes back
// with its data (every connection dropped, as in a restart or failover),
// the listening connection and a pooled one included. The listener
// connects again by itself: an enqueue through the other replica wakes
// this one again, not only the dispatcher's timer.
func TestPostgresQueueWakeAfterARestart(t *testing.T) {
	dsn := pgtest.DSN(t)
	later := pgtest.NotYet(t, dsn)
	later.Up()
	ctx := context.Background()
	a, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: later.DSN}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	wake := a.QueueWake()
	waitWake := func(what string) {
		t.Helper()
		select {
		case <-wake:
		case <-time.After(30 * time.Second):
			t.Fatal(what)
		}
	}
	waitWake("the listener never connected")
	conv := core.ConversationKey{Channel: "telegram", Chat: "restart"}
	if _, _, err := a.Enqueue(ctx, msgItem(conv, "1", "before")); err != nil {
		t.Fatal(err)
	}
	waitWake("its own enqueue did not reach the listener")

	later.Down()
	later.Up()
	// The pool's connections were cut too: a query through a works again.
	for i := 0; ; i++ {
		if _, err := a.SchemaVersion(ctx); err == nil {
			break
		} else if i == 100 {
			t.Fatalf("a query after the restart: %v", err)
		}
	}
	waitWake("the listener did not connect again after the restart")
	if _, _, err := b.Enqueue(ctx, msgItem(core.ConversationKey{Channel: "telegram", Chat: "restart2"}, "2", "after")); err != nil {
		t.Fatal(err)
	}
	waitWake("an enqueue on the other replica after the restart did not wake this one")
}

// TestPostgresMigrationOutlastsStatementTimeout: a replica starts while
// another holds the migration lock (it is migrating) for longer than
// state.postgres.statement_timeout. The wait for the lock, like a
// migration's own statements, is not cut by the timeout meant for the
// gateway's queries: the replica starts once the lock is released, and
// its queries afterwards are still under the timeout.
func TestPostgresMigrationOutlastsStatementTimeout(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	opts := Options{Postgres: &Postgres{DSN: dsn, StatementTimeout: time.Second}}
	first, err := Open(ctx, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	holder, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	conn, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		t.Fatal(err)
	}
	type opened struct {
		db  *DB
		err error
	}
	done := make(chan opened, 1)
	go func() {
		db, err := Open(ctx, t.TempDir(), opts)
		done <- opened{db, err}
	}()
	// Wait until the replica has waited for the lock longer than its
	// statement_timeout (or has given up).
	for waited := false; !waited; {
		select {
		case o := <-done:
			t.Fatalf("the replica did not wait for the migration lock: %v", o.err)
		case <-time.After(50 * time.Millisecond):
		}
		if err := holder.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
			WHERE l.locktype = 'advisory' AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid AND l.objsubid = 1
			AND NOT l.granted AND now() - a.query_start > interval '1500 ms')`, int64(migrationLock)>>32, int64(migrationLock)&0xffffffff).Scan(&waited); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, int64(migrationLock)); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("the replica after the migration lock was released: %v", o.err)
	}
	defer o.db.Close()
	var timeout string
	if err := o.db.w.DB.QueryRowContext(ctx, `SHOW statement_timeout`).Scan(&timeout); err != nil || timeout != "1s" {
		t.Fatalf("statement_timeout of the replica's queries: %q, %v; want 1s", timeout, err)
	}
}

// TestPostgresMigrationLetsGoOfALockedTable: a replica of a newer release
// migrates while a long transaction (a running replica's, an operator's
// session) holds the table the migration alters. Its wait for the lock is
// bounded: it lets go, says so, and tries again, so the queries of that
// table go on meanwhile instead of queueing behind it; once the
// transaction ends, the migration is applied.
func TestPostgresMigrationLetsGoOfALockedTable(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	first, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	raw, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The database as the release before migration 170 left it.
	for _, q := range []string{`ALTER TABLE queue DROP COLUMN waiting`, `DELETE FROM schema_migrations WHERE version = 170`} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	long, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Rollback()
	if _, err := long.ExecContext(ctx, `SELECT count(*) FROM queue`); err != nil {
		t.Fatal(err)
	}

	recs := newRecords()
	type opened struct {
		db  *DB
		err error
	}
	done := make(chan opened, 1)
	go func() {
		db, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: dsn}, Logger: slog.New(recs), lockWait: 200 * time.Millisecond})
		done <- opened{db, err}
	}()
	recs.next(t, "a migration waits for a table another session holds")
	queried := make(chan error, 1)
	go func() {
		_, err := raw.ExecContext(ctx, `SELECT count(*) FROM queue`)
		queried <- err
	}()
	select {
	case err := <-queried:
		if err != nil {
			t.Fatal(err)
		}
	case o := <-done:
		t.Fatalf("the migration ended (%v) while the transaction held its table", o.err)
	case <-time.After(30 * time.Second):
		t.Fatal("a query of the table waited behind the migration")
	}
	if err := long.Commit(); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("the migration once the transaction ended: %v", o.err)
	}
	defer o.db.Close()
	var n int
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = 170`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 170 recorded %d times (%v); want once", n, err)
	}
	if !strings.Contains(recs.text(), `migration="170_queue_waiting.sql"`) {
		t.Errorf("the log does not name the waiting migration:\n%s", recs.text())
	}
}

// lockedLog is a log a test reads while the store writes it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPostgresListenerRetriesAtLeastEveryTwoSeconds: through an outage
// longer than a few retries the listener keeps trying to connect at
// least as often as the dispatcher polls (2 s), so that after the server
// is back other replicas' work and a /stop typed on another replica
// reach this one within that; its wait grew to 30 s. The log says the
// loss once (not every try) and the reconnection.
func TestPostgresListenerRetriesAtLeastEveryTwoSeconds(t *testing.T) {
	later := pgtest.NotYet(t, pgtest.DSN(t))
	later.Up()
	ctx := context.Background()
	logs := &lockedLog{}
	a, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: later.DSN}, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	wake := a.QueueWake()
	waitWake := func(what string) {
		t.Helper()
		select {
		case <-wake:
		case <-time.After(30 * time.Second):
			t.Fatal(what)
		}
	}
	waitWake("the listener never connected")
	later.Down()
	// Eight tries: with a wait that doubles from 0.1 s, past 2 s.
	waits := regexp.MustCompile(`msg="queue notifications: [^"]*" .*retry_in=(\S+)`)
	var got []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got = nil
		for _, m := range waits.FindAllStringSubmatch(logs.String(), -1) {
			got = append(got, m[1])
		}
		if len(got) >= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listener tried %d times:\n%s", len(got), logs.String())
		}
	}
	for _, w := range got {
		d, err := time.ParseDuration(w)
		if err != nil {
			t.Fatal(err)
		}
		if d > 2*time.Second {
			t.Errorf("the listener waits %s before trying again; want at most 2s (tries so far: %v)", d, got)
			break
		}
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"queue notifications"); n != 1 {
		t.Errorf("the loss was logged %d times at WARN; want once", n)
	}
	later.Up()
	waitWake("the listener did not connect again")
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "queue notifications: connected again"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reconnection is not logged:\n%s", logs.String())
		}
	}
}
