package main

// The end-to-end suite on PostgreSQL: TestE2EOnPostgres runs the
// crash-loop test and the channel tests once more in a child test run
// whose configs put the state on a fresh PostgreSQL database each
// (withTestStore); and the operations that differ on PostgreSQL: state
// migrate, doctor, backup.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// envTestDriver, set to postgres, makes every config the e2e tests write
// use a fresh PostgreSQL database (TestE2EOnPostgres sets it for the run
// it starts).
const envTestDriver = "OPENTALON_TEST_STATE_DRIVER"

// withTestStore puts yaml's state on a fresh PostgreSQL database when the
// run is the PostgreSQL one; otherwise it returns yaml unchanged. Claims
// of a killed process are taken back after queue.lease_ttl, so the run
// uses a short one.
func withTestStore(t testing.TB, yaml string) string {
	if os.Getenv(envTestDriver) != "postgres" {
		return yaml
	}
	state := fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", pgtest.DSN(t))
	yaml = insertUnder(yaml, "state", state)
	yaml = insertUnder(yaml, "queue", "  lease_ttl: 2s\n")
	t.Logf("the state of this test is on PostgreSQL (%s=postgres)", envTestDriver)
	return yaml
}

// insertUnder adds lines to yaml's top-level block key (created when
// missing).
func insertUnder(yaml, key, lines string) string {
	head := key + ":\n"
	switch {
	case strings.HasPrefix(yaml, head):
		return head + lines + yaml[len(head):]
	case strings.Contains(yaml, "\n"+head):
		return strings.Replace(yaml, "\n"+head, "\n"+head+lines, 1)
	}
	if !strings.HasSuffix(yaml, "\n") {
		yaml += "\n"
	}
	return yaml + head + lines
}

// postgresSuite are the e2e tests TestE2EOnPostgres runs again.
var postgresSuite = []string{
	"TestE2ECrashLoopAnswersEveryMessageOnce",
	"TestE2ETelegramThroughApp",
	"TestE2ESlackSocketModeThroughApp",
	"TestE2ESlackEventsModeThroughApp",
	"TestE2ESlackRefusedTokenStopsStartUp",
	"TestE2EDiscordThroughApp",
	"TestE2EDiscordRefusedTokenFailsStartNamingTheKey",
	"TestE2EConsoleEOFDoesNotStopOtherChannels",
	"TestE2EDisabledChannelModelDoesNotFailStartUp",
	"TestE2EFailingChannelRestartedAndReported",
	// The status page's API and /metrics read the store too.
	"TestStatusAPIShapes",
	"TestE2EMetricsAfterTelegramTraffic",
	// `opentalon queue` reads the leases replicas hold.
	"TestE2EQueueBesideRunningGateway",
	"TestE2EQueueStates",
}

func TestE2EOnPostgres(t *testing.T) {
	if os.Getenv(envTestDriver) != "" {
		t.Skip("this is the PostgreSQL run")
	}
	if testing.Short() {
		t.Skip("runs the crash loop and the channel tests once more")
	}
	admin := pgtest.AdminDSN(t)
	cmd := exec.Command(os.Args[0], "-test.run=^("+strings.Join(postgresSuite, "|")+")$", "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), envTestDriver+"=postgres", pgtest.EnvServer+"="+admin)
	out, err := cmd.CombinedOutput()
	for _, name := range postgresSuite {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).Match(out) {
			t.Errorf("%s did not pass on PostgreSQL", name)
		}
	}
	if n := strings.Count(string(out), "the state of this test is on PostgreSQL"); n < len(postgresSuite) {
		t.Errorf("only %d test configs were put on PostgreSQL; want one per test at least", n)
	}
	if err != nil || t.Failed() {
		t.Fatalf("the suite on PostgreSQL: %v\n%s", err, tail(string(out), 200))
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// pgConfig is testConfig with the database on PostgreSQL (driver) or
// only its DSN set (the target of state migrate).
func pgConfig(dataDir, llmURL, dsn, driver string) string {
	return strings.Replace(testConfig(dataDir, llmURL, ""), "state:\n", fmt.Sprintf("state:\n  driver: %s\n  postgres: { dsn: %q }\n", driver, dsn), 1)
}

// TestE2EStateMigrateThenAnswerOnPostgres: a single-machine gateway's
// history, memories and learned affinity move to PostgreSQL with `state
// migrate`; the gateway on PostgreSQL answers with them. The copy is
// refused while a gateway holds the data directory and is idempotent.
func TestE2EStateMigrateThenAnswerOnPostgres(t *testing.T) {
	if os.Getenv(envTestDriver) != "" {
		t.Skip("starts on SQLite on purpose")
	}
	llm := providertest.NewOpenAI(t)
	data := filepath.Join(t.TempDir(), "data")
	dsn := pgtest.DSN(t)
	ctx := context.Background()

	// Today: one machine, SQLite.
	h := startApp(t, parseConfig(t, testConfig(data, llm.BaseURL(), "")))
	h.send("my favourite colour is teal")
	h.expect("echo: my favourite colour is teal")
	h.shutdown()
	db, err := store.Open(ctx, data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveMemory(ctx, core.Memory{Owner: "console:local", Content: "Favourite colour: teal, like Biscuit the parrot"}); err != nil {
		t.Fatal(err)
	}
	if err := db.UpdateAffinity(ctx, "chat", "fake/small", func(a core.Affinity) core.Affinity { a.Positives, a.Pos = 7, 6.5; return a }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// A config of the state alone does: the move needs no LLM provider.
	migrate := writeConfig(t, fmt.Sprintf("state:\n  data_dir: %q\n  postgres: { dsn: %q }\n", data, dsn))
	// Refused while a gateway holds the data directory.
	lock, err := lockDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	res := runMain(t, nil, "", "--config", migrate, "state", "migrate", "--from", "sqlite", "--to", "postgres")
	lock.release()
	if res.code == 0 || !strings.Contains(res.stderr, "state migrate refused") || !strings.Contains(res.stderr, "another opentalon instance") {
		t.Fatalf("state migrate while a gateway runs: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := runMain(t, nil, "", "--config", migrate, "state", "migrate", "--from", "postgres", "--to", "sqlite"); res.code != 2 || !strings.Contains(res.stderr, "usage: opentalon state migrate --from sqlite --to postgres") {
		t.Fatalf("the other direction: exit %d\n%s", res.code, res.stderr)
	}
	res = runMain(t, nil, "", "--config", migrate, "state", "migrate", "--from", "sqlite", "--to", "postgres")
	if res.code != 0 || !strings.Contains(res.stdout, "messages") || !strings.Contains(res.stdout, "next: set state.driver: postgres") {
		t.Fatalf("state migrate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if strings.Contains(res.stdout+res.stderr, dsn) {
		t.Fatal("state migrate printed the DSN")
	}
	again := runMain(t, nil, "", "--config", writeConfig(t, pgConfig(data, llm.BaseURL(), dsn, "sqlite")), "state", "migrate", "--from", "sqlite", "--to", "postgres")
	if again.code != 0 || !regexp.MustCompile(`copied 0 of \d+ row`).MatchString(again.stdout) {
		t.Fatalf("state migrate again: exit %d\n%s%s; want nothing copied twice", again.code, again.stdout, again.stderr)
	}

	// Tomorrow: the gateway on PostgreSQL answers with the old history and
	// memories, and routes with what it learned.
	onPG := writeConfig(t, pgConfig(data, llm.BaseURL(), dsn, "postgres"))
	h = startApp(t, loadConfigFile(t, onPG))
	h.send("what is my favourite colour?")
	h.expect("echo: what is my favourite colour?")
	r, _ := llm.Last()
	var history []string
	for _, m := range r.Messages {
		history = append(history, m.Content)
	}
	if !strings.Contains(strings.Join(history, "|"), "my favourite colour is teal") {
		t.Errorf("the LLM saw %q; want the conversation's history from SQLite", history)
	}
	if !strings.Contains(r.System, "Biscuit") {
		t.Errorf("the system prompt lacks the migrated memory:\n%s", r.System)
	}
	h.shutdown()
	res = runMain(t, nil, "", "--config", onPG, "affinity", "show", "--json")
	if res.code != 0 || !strings.Contains(res.stdout, `"positive": 7`) {
		t.Fatalf("affinity on PostgreSQL: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// TestE2EDoctorAndBackupOnPostgres: doctor checks the server, the schema
// and the leased queue; backup runs pg_dump (the password in its
// environment) or says to install it.
func TestE2EDoctorAndBackupOnPostgres(t *testing.T) {
	if os.Getenv(envTestDriver) != "" {
		t.Skip("configures PostgreSQL itself")
	}
	llm := providertest.NewOpenAI(t)
	dsn := pgtest.DSN(t)
	path := writeConfig(t, pgConfig(filepath.Join(t.TempDir(), "data"), llm.BaseURL(), dsn, "postgres"))
	res := runMain(t, nil, "", "--config", path, "doctor", "--offline")
	if res.code != 0 || !strings.Contains(res.stdout, "all checks passed") {
		t.Fatalf("doctor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{"ok    database: PostgreSQL database", "(PostgreSQL 1", "schema version " + strconv.Itoa(latestPGSchema(t)), "every table readable", "ok    queue: 0 conversation(s) with work"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, res.stdout)
		}
	}
	bad := writeConfig(t, pgConfig(filepath.Join(t.TempDir(), "data"), llm.BaseURL(), pgtest.WithDatabase(pgtest.AdminDSN(t), "missing_db"), "postgres"))
	res = runMain(t, nil, "", "--config", bad, "doctor", "--offline")
	if res.code == 0 || !strings.Contains(res.stdout, "FAIL  database: the database \"missing_db\" does not exist") {
		t.Fatalf("doctor on a missing database: exit %d\n%s", res.code, res.stdout)
	}

	if _, err := exec.LookPath("pg_dump"); err == nil {
		file := filepath.Join(t.TempDir(), "opentalon.dump")
		res = runMain(t, map[string]string{"PATH": os.Getenv("PATH")}, "", "--config", path, "backup", file)
		if res.code != 0 || !strings.Contains(res.stdout, "backed up the PostgreSQL database with pg_dump") {
			t.Fatalf("backup: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		head := make([]byte, 5)
		if f, err := os.Open(file); err != nil {
			t.Fatal(err)
		} else {
			f.Read(head)
			f.Close()
		}
		if string(head) != "PGDMP" {
			t.Fatalf("the backup starts with %q; want a pg_dump archive", head)
		}
		// The way back it names works on the database it came from,
		// which has the schema and the rows still.
		_, hint, _ := strings.Cut(strings.TrimSpace(res.stdout), "restore it (the gateways stopped) with ")
		libpq, password := withoutPassword(dsn) // the test's schema as libpq names it
		args := strings.Fields(strings.Replace(hint, "DSN", libpq, 1))
		if len(args) < 2 || args[0] != "pg_restore" {
			t.Fatalf("backup names no pg_restore command: %q", res.stdout)
		}
		restore := exec.Command(args[0], args[1:]...)
		restore.Env = append(os.Environ(), "PGPASSWORD="+password)
		if out, err := restore.CombinedOutput(); err != nil {
			t.Fatalf("the restore backup names (%s) failed on the live database: %v\n%s", hint, err, out)
		}
	}
	res = runMain(t, map[string]string{"PATH": t.TempDir()}, "", "--config", path, "backup", filepath.Join(t.TempDir(), "x.dump"))
	if res.code == 0 || !strings.Contains(res.stderr, "backed up with pg_dump, which is not installed here") {
		t.Fatalf("backup without pg_dump: exit %d\n%s", res.code, res.stderr)
	}
	if res := runMain(t, nil, "", "--config", path, "restore", path); res.code == 0 || !strings.Contains(res.stderr, "pg_restore") {
		t.Fatalf("restore on PostgreSQL: exit %d\n%s", res.code, res.stderr)
	}
}

// TestE2EWriteOnAReadOnlyServerNamesTheFix: the commands that only read
// work against a standby; one that writes is refused with the fix named,
// not with PostgreSQL's bare "read-only transaction".
func TestE2EWriteOnAReadOnlyServerNamesTheFix(t *testing.T) {
	if os.Getenv(envTestDriver) != "" {
		t.Skip("configures PostgreSQL itself")
	}
	llm := providertest.NewOpenAI(t)
	ro := pgtest.ReadOnlyRole(t, pgtest.DSN(t))
	path := writeConfig(t, pgConfig(filepath.Join(t.TempDir(), "data"), llm.BaseURL(), ro.DSN, "postgres"))
	ro.SetReadOnly(false) // the schema is made while the role may write
	if res := runMain(t, nil, "", "--config", path, "memory", "list"); res.code != 0 {
		t.Fatalf("memory list on the primary: exit %d\n%s", res.code, res.stderr)
	}
	ro.SetReadOnly(true)
	for _, args := range [][]string{{"memory", "list"}, {"queue", "--status", "all"}} {
		if res := runMain(t, nil, "", append([]string{"--config", path}, args...)...); res.code != 0 {
			t.Fatalf("%v on a read-only server: exit %d\n%s", args, res.code, res.stderr)
		}
	}
	res := runMain(t, nil, "", "--config", path, "memory", "delete", "--user", "telegram:1", "--all")
	if res.code != 1 {
		t.Fatalf("memory delete on a read-only server: exit %d, want 1\n%s", res.code, res.stderr)
	}
	for _, want := range []string{"read-only transaction", "takes no writes", "state.postgres.dsn", "target_session_attrs=read-write"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("memory delete on a read-only server says:\n%s\nwant %q", res.stderr, want)
		}
	}
}

// TestE2ENulByteAnsweredOnPostgres: a NUL byte in a message, or in the
// model's answer, which a PostgreSQL TEXT cannot hold, is dropped; the
// message is answered as on SQLite instead of failing after the LLM call.
func TestE2ENulByteAnsweredOnPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a process")
	}
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if r.LastUser() == "model nul" {
			return providertest.Script{Text: "model \x00said"}
		}
		return providertest.Echo(r)
	})
	path := writeConfig(t, pgConfig(filepath.Join(t.TempDir(), "data"), llm.BaseURL(), pgtest.DSN(t), "postgres"))
	p := startBinary(t, nil, "--config", path, "run")
	p.send("user \x00nul")
	p.waitLine("echo: user nul")
	p.send("model nul")
	p.waitLine("model said")
	p.send("after")
	p.waitLine("echo: after")
	if out := p.output(); strings.Contains(out, "Sorry") {
		t.Errorf("a NUL byte failed a turn:\n%s", out)
	}
}

// TestE2EAffinityResetWaitsForTheReplicasOnPostgres: a reset of what the
// router learned is refused while a replica runs on the database (it
// would write its learning back), naming it; once it stopped, it runs.
func TestE2EAffinityResetWaitsForTheReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a process")
	}
	llm := providertest.NewOpenAI(t)
	dsn := pgtest.DSN(t)
	replica := func() string {
		y := pgConfig(filepath.Join(t.TempDir(), "data"), llm.BaseURL(), dsn, "postgres")
		return writeConfig(t, strings.Replace(y, "server:\n", "cluster:\n  replica_id: learner\nserver:\n", 1))
	}
	p := startBinary(t, nil, "--config", replica(), "run")
	p.send("hello")
	p.waitLine("echo: hello")
	cli := replica()
	if res := runMain(t, nil, "", "--config", cli, "affinity", "reset"); res.code != 1 ||
		!strings.Contains(res.stderr, "1 replica(s) run on this database (learner,") || !strings.Contains(res.stderr, "stop them first") {
		t.Errorf("affinity reset while a replica runs: exit %d\n%s", res.code, res.stderr)
	}
	p.closeInput()
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("replica exit %d\n%s", code, p.stderr.String())
	}
	if res := runMain(t, nil, "", "--config", cli, "affinity", "reset"); res.code != 0 {
		t.Errorf("affinity reset once the replica stopped: exit %d\n%s", res.code, res.stderr)
	}
}

// latestPGSchema is the number of the newest PostgreSQL migration.
func latestPGSchema(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("../../store/migrations_pg")
	if err != nil {
		t.Fatal(err)
	}
	latest := 0
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.Atoi(num); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// TestE2EStateMigrateKeepsTheMediaFiles: the files users sent a
// single-machine gateway (kept only in <data_dir>/media on SQLite) move to
// PostgreSQL with `state migrate`: a replica with an empty data directory
// shows the model a photo sent before the move, without downloading it
// again. A file already gone from the media directory is skipped and
// counted, not a failure. The config already says driver: postgres, and
// the command does not tell to set it.
func TestE2EStateMigrateKeepsTheMediaFiles(t *testing.T) {
	if os.Getenv(envTestDriver) != "" {
		t.Skip("starts on SQLite on purpose")
	}
	t.Parallel()
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	alice, bob := telegramtest.User(71, "alice"), telegramtest.User(72, "bob")
	jpg := photo(t)
	notes := []byte("bob's notes: the boiler is serviced in March")

	// Today: one machine, SQLite.
	dirA := t.TempDir()
	a := startApp(t, loadConfigFile(t, writeConfig(t, visionCatalog(telegramConfig(dirA, llm.BaseURL(), bot.URL)))))
	bot.AddUpdate(bot.Photo(alice, bot.AddFile(jpg), len(jpg), "what is in this picture?"))
	bot.WaitSent(t, 1, 20*time.Second)
	if u := lastUser(t, llm); len(u.Attachments) != 1 || !bytes.Equal(u.Attachments[0].Data, jpg) {
		t.Fatalf("on SQLite the LLM got %d images; want the photo", len(u.Attachments))
	}
	bot.AddUpdate(bot.Document(bob, bot.AddFile(notes), "notes.txt", "text/plain", len(notes), "keep this"))
	bot.WaitSent(t, 2, 20*time.Second)
	a.shutdown()
	// Bob's file is gone from the media directory (removed by hand).
	sum := sha256.Sum256(notes)
	if err := os.Remove(filepath.Join(dirA, store.MediaDir, hex.EncodeToString(sum[:]))); err != nil {
		t.Fatalf("bob's document is not in the media directory: %v", err)
	}

	cfgA := writeConfig(t, replicaConfig(dirA, llm.BaseURL(), bot.URL, dsn))
	res := runMain(t, nil, "", "--config", cfgA, "state", "migrate", "--from", "sqlite", "--to", "postgres")
	if res.code != 0 {
		t.Fatalf("state migrate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !regexp.MustCompile(`(?m)^  media_bytes +1 row\(s\), +1 new \(1 media file\(s\) skipped: not in `).MatchString(res.stdout) {
		t.Errorf("state migrate does not report the photo's bytes copied and bob's file skipped:\n%s", res.stdout)
	}
	if !strings.Contains(res.stdout, "next: start one gateway with this config (it has state.driver: postgres)") || strings.Contains(res.stdout, "set state.driver") {
		t.Errorf("state migrate with driver: postgres in the config tells to set it:\n%s", res.stdout)
	}
	again := runMain(t, nil, "", "--config", cfgA, "state", "migrate", "--from", "sqlite", "--to", "postgres")
	if again.code != 0 || !regexp.MustCompile(`(?m)^  media_bytes +1 row\(s\), +0 new \(1 media file`).MatchString(again.stdout) {
		t.Fatalf("state migrate again: exit %d\n%s%s; want the photo's bytes there already", again.code, again.stdout, again.stderr)
	}

	// Tomorrow: a replica whose data directory is empty (a new container)
	// re-answers alice with her photo, read from the database.
	// getFile twice: each file downloaded once, before the migration.
	retryOnReplica(t, replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, dsn), bot, llm, alice, jpg, 3, 2)
}
