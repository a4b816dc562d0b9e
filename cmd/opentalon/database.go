package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/store"
)

// storeOptions adds cfg's database to o: the PostgreSQL database of
// state.driver: postgres (the SQLite file in state.data_dir otherwise).
func storeOptions(cfg *config.Config, o store.Options) store.Options {
	if cfg.State.Driver == config.DriverPostgres {
		pg := cfg.State.Postgres
		o.Postgres = &store.Postgres{DSN: pg.DSN.Value(), PoolSize: pg.PoolSize, StatementTimeout: pg.StatementTimeout.D()}
	}
	return o
}

// openStore opens cfg's database (state.driver).
func openStore(ctx context.Context, cfg *config.Config, o store.Options) (*store.DB, error) {
	return store.Open(ctx, cfg.State.DataDir, storeOptions(cfg, o))
}

// openStoreToWrite is openStore for what will write: a PostgreSQL server
// that takes no writes (a standby) is refused with the fix named, not
// found out by a failed INSERT.
func openStoreToWrite(ctx context.Context, cfg *config.Config, o store.Options) (*store.DB, error) {
	o = storeOptions(cfg, o)
	if o.Postgres != nil {
		o.Postgres.Writable = true
	}
	return store.Open(ctx, cfg.State.DataDir, o)
}

// pgDump backs up the PostgreSQL database of cfg with pg_dump (custom
// format, restored with pg_restore) when pg_dump is installed, and says
// how otherwise. The password reaches pg_dump in its environment, never
// on its command line (which other users of the machine can read).
func pgDump(ctx context.Context, cfg *config.Config, file string, io Stdio, env config.Env) error {
	if _, err := os.Stat(file); err == nil {
		return fmt.Errorf("backup: %s already exists; name a new file", file)
	}
	bin, err := lookPath("pg_dump", getenv(env, "PATH"))
	if err != nil {
		return fmt.Errorf("state.driver is postgres: a PostgreSQL database is backed up with pg_dump, which is not installed here (apt-get install postgresql-client); then run opentalon backup %s again, or pg_dump --format=custom --file=%s \"$OPENTALON_POSTGRES_DSN\" yourself, or rely on the server's own backups", file, file)
	}
	dsn, password := withoutPassword(cfg.State.Postgres.DSN.Value())
	cmd := exec.CommandContext(ctx, bin, "--format=custom", "--no-owner", "--file="+file, "--dbname="+dsn)
	cmd.Env = os.Environ()
	if password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+password)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		os.Remove(file)
		msg := strings.TrimSpace(stderr.String())
		if password != "" {
			msg = strings.ReplaceAll(msg, password, "***")
		}
		return fmt.Errorf("pg_dump of state.postgres.dsn failed (%v): %s", err, msg)
	}
	size := int64(0)
	if fi, err := os.Stat(file); err == nil {
		size = fi.Size()
		os.Chmod(file, 0o600)
	}
	fmt.Fprintf(io.Out, "backed up the PostgreSQL database with pg_dump to %s (%s in %s); restore it (the gateways stopped) with %s\n", file, humanBytes(size), time.Since(t0).Round(time.Millisecond), pgRestoreHint(file))
	return nil
}

// pgRestoreHint is the command that puts the pg_dump archive file back
// into the database it came from: without --clean, pg_restore into the
// database, which has the schema and rows already, fails on every object
// and restores nothing; --if-exists keeps it quiet on an empty one.
func pgRestoreHint(file string) string {
	return "pg_restore --clean --if-exists --no-owner --dbname=DSN " + file
}

// libpqParams are the URI parameters pg_dump (libpq) understands; the driver
// accepts any run-time parameter there too (search_path=…), which libpq
// takes only inside options as -c name=value.
var libpqParams = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "passfile": true, "channel_binding": true,
	"connect_timeout": true, "client_encoding": true, "options": true, "application_name": true, "fallback_application_name": true,
	"keepalives": true, "keepalives_idle": true, "keepalives_interval": true, "keepalives_count": true, "tcp_user_timeout": true,
	"gssencmode": true, "sslmode": true, "requiressl": true, "sslcompression": true, "sslcert": true, "sslkey": true,
	"sslpassword": true, "sslrootcert": true, "sslcrl": true, "sslcrldir": true, "sslsni": true, "requirepeer": true,
	"ssl_min_protocol_version": true, "ssl_max_protocol_version": true, "krbsrvname": true, "gsslib": true, "service": true,
	"target_session_attrs": true, "load_balance_hosts": true,
}

// pgxOnly are parameters of pgx itself, meaningless to the server.
func pgxOnly(name string) bool {
	return strings.HasPrefix(name, "pool_") || name == "statement_cache_capacity" || name == "description_cache_capacity" ||
		name == "default_query_exec_mode" || name == "prefer_simple_protocol" || name == "min_read_buffer_size"
}

// withoutPassword returns dsn as libpq reads it, without its password,
// and the password.
func withoutPassword(dsn string) (string, string) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		pw, _ := u.User.Password()
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		if p := q.Get("password"); p != "" {
			pw = p
		}
		q.Del("password")
		var opts []string
		for name, vals := range q {
			switch {
			case libpqParams[name]:
			case pgxOnly(name):
				q.Del(name)
			default:
				for _, v := range vals {
					opts = append(opts, "-c "+name+"="+v)
				}
				q.Del(name)
			}
		}
		if len(opts) > 0 {
			sort.Strings(opts)
			q.Set("options", strings.TrimSpace(q.Get("options")+" "+strings.Join(opts, " ")))
		}
		// libpq decodes %20, not +, as a space (Encode writes a + as %2B).
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String(), pw
	}
	// The key=value form: values are bare or single-quoted with
	// backslash escapes.
	var kept []string
	pw := ""
	for rest := strings.TrimSpace(dsn); rest != ""; rest = strings.TrimLeft(rest, " \t\n") {
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			return dsn, ""
		}
		key = strings.TrimSpace(key)
		after = strings.TrimLeft(after, " \t")
		var raw, val string
		if strings.HasPrefix(after, "'") {
			i := 1
			var b strings.Builder
			for ; i < len(after) && after[i] != '\''; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				b.WriteByte(after[i])
			}
			raw, val, rest = after[:min(i+1, len(after))], b.String(), after[min(i+1, len(after)):]
		} else {
			end := strings.IndexAny(after, " \t\n")
			if end < 0 {
				end = len(after)
			}
			raw, val, rest = after[:end], after[:end], after[end:]
		}
		if key == "password" {
			pw = val
			continue
		}
		kept = append(kept, key+"="+raw)
	}
	return strings.Join(kept, " "), pw
}

// lookPath finds an executable named name in the directories of path
// (the PATH of the command's environment).
func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// errNoDSN says state migrate has no target.
var errNoDSN = errors.New("state migrate --to postgres copies into the database of state.postgres.dsn, which is not set, or names an environment variable that is not set; set it (e.g. dsn: \"${OPENTALON_POSTGRES_DSN}\") in the config and export the variable, or leave the key out and export OPENTALON_POSTGRES_DSN")

const stateUsage = "usage: opentalon state migrate --from sqlite --to postgres [--config FILE] (copies <state.data_dir>/opentalon.db into the database of state.postgres.dsn)"

// cmdState implements `opentalon state migrate --from sqlite --to
// postgres`: it copies the single-machine database (the config's
// state.data_dir) into the PostgreSQL database of its state.postgres.dsn,
// ids preserved, sequences moved past them, idempotent on a re-run, and
// the bytes of the media files (<state.data_dir>/media) into media_bytes,
// where replicas read them. It holds the data directory's lock, so it is
// refused while a gateway runs there.
func cmdState(ctx context.Context, g *globalFlags, args []string, io Stdio, env config.Env, log *slog.Logger) error {
	if len(args) == 0 || args[0] != "migrate" {
		return subUsageError("state", args, "migrate", stateUsage)
	}
	var from, to string
	rest, err := parseSub("state migrate", g, args[1:], io, func(fs *flag.FlagSet) {
		fs.StringVar(&from, "from", "", "the engine to copy from: sqlite")
		fs.StringVar(&to, "to", "", "the engine to copy to: postgres")
	})
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return argCountError("state migrate", rest, 0, "", stateUsage)
	case from != "" && from != config.DriverSQLite:
		return usageError{fmt.Sprintf("state migrate: --from %q is not supported (supported: sqlite); %s", from, stateUsage)}
	case to != "" && to != config.DriverPostgres:
		return usageError{fmt.Sprintf("state migrate: --to %q is not supported (supported: postgres); %s", to, stateUsage)}
	case from == "" || to == "":
		return usageError{"state migrate: give both --from sqlite and --to postgres; " + stateUsage}
	}
	// Only state: matters; a config without an LLM provider (one written
	// for the move) does as well as the gateway's.
	cfg, err := loadConfigFor(g, env, "state")
	if err != nil {
		return err
	}
	if !cfg.State.Postgres.DSN.IsSet() {
		return errNoDSN
	}
	dir := cfg.State.DataDir
	path := filepath.Join(dir, store.FileName)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("state migrate: no SQLite database at %s (state.data_dir): %w", path, err)
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return fmt.Errorf("state migrate refused: %w", err)
	}
	defer lock.release()
	src, err := store.OpenFile(ctx, path, store.Options{Logger: log})
	if err != nil {
		return err
	}
	defer src.Close()
	pgCfg := *cfg
	pgCfg.State.Driver = config.DriverPostgres
	dst, err := openStoreToWrite(ctx, &pgCfg, store.Options{Logger: log})
	if err != nil {
		return err
	}
	defer dst.Close()
	fmt.Fprintf(io.Out, "copying %s into %s\n", path, dst.Name())
	t0 := time.Now()
	total, copied, repaired := 0, 0, 0
	media := filepath.Join(dir, store.MediaDir)
	var files store.CopiedTable
	_, err = dst.CopyFrom(ctx, src, func(c store.CopiedTable) {
		total, copied, repaired = total+c.Rows, copied+c.Copied, repaired+c.Repaired
		if c.Table == store.MediaBytesTable {
			files = c
		}
		note := ""
		if c.Repaired > 0 {
			note = fmt.Sprintf(" (%d text(s) held NUL bytes or invalid UTF-8, which PostgreSQL cannot store: copied without the NUL bytes, invalid bytes as U+FFFD)", c.Repaired)
		}
		if c.Missing > 0 {
			note = fmt.Sprintf(" (%d media file(s) skipped: not in %s (swept or deleted), so not kept on SQLite either)", c.Missing, media)
			if p := cfg.Plugins.Blobs.Plugin; p != "" {
				note = fmt.Sprintf(" (%d media file(s) not in %s, not copied: replicas read them from the blob store (plugins.blobs.plugin: %s) if it has them)", c.Missing, media, p)
			}
		}
		fmt.Fprintf(io.Out, "  %-18s %7d row(s), %7d new%s\n", c.Table, c.Rows, c.Copied, note)
	})
	if errors.As(err, new(store.CopyClashError)) {
		return fmt.Errorf("state migrate: %w", err)
	}
	if err != nil {
		return fmt.Errorf("state migrate: %w (what was copied stays; run it again to go on)", err)
	}
	// Among replicas each terminal has a conversation of its own: this
	// machine's console goes on with the console history it had.
	if own := consoleConversation(&pgCfg); pgCfg.Channels.Console.Enabled {
		n, err := dst.RenameConversation(ctx, consoleShared, own)
		if err != nil {
			return fmt.Errorf("state migrate: %w (run it again to go on)", err)
		}
		if n > 0 {
			fmt.Fprintf(io.Out, "the console's %d session(s) are this machine's console conversation %s now\n", n, own)
		}
	}
	fmt.Fprintf(io.Out, "copied %d of %d row(s) in %s (the rest were there already); the rows of %s are left as they were.\n", copied, total, time.Since(t0).Round(time.Millisecond), path)
	if files.Rows > 0 {
		fmt.Fprintf(io.Out, "the bytes of %d media file(s) of %s are in the database (media_bytes): every replica reads them from there, its state.data_dir keeps a cache of them only\n", files.Rows, media)
	}
	if cfg.State.Driver == config.DriverPostgres {
		fmt.Fprintf(io.Out, "next: start one gateway with this config (it has state.driver: postgres)\n")
	} else {
		fmt.Fprintf(io.Out, "next: set state.driver: postgres in the config and start one gateway\n")
	}
	if repaired > 0 {
		fmt.Fprintf(io.Out, "%d text(s) were repaired on the way (see above)\n", repaired)
	}
	return nil
}
