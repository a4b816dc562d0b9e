package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/store"
)

const doctorUsage = "usage: opentalon doctor [--channels] [--offline]"

// checkTimeout bounds one network check.
const checkTimeout = 20 * time.Second

// Free space below these on the data directory's file system fails or
// warns.
const (
	minFreeBytes  = 100 << 20
	warnFreeBytes = 1 << 30
)

// doctor runs the checks and prints one line per check: ok, warn, FAIL
// (with the fix) or skip.
type doctor struct {
	out    io.Writer
	failed int
}

// line writes one check's line safe for the terminal (termLines): a
// message may quote what a provider or a platform answered. A message of
// several lines (the config's problems, one a line) keeps them, each
// after the first indented, so no quoted line can pass for a check's.
func (d *doctor) line(tag, what, msg string, args ...any) {
	lines := strings.Split(termLines(fmt.Sprintf(msg, args...)), "\n")
	for i := 1; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], " ") && !strings.HasPrefix(lines[i], "\t") {
			lines[i] = "  " + lines[i]
		}
	}
	fmt.Fprintf(d.out, "%s%s: %s\n", tag, termText(what), strings.Join(lines, "\n"))
}

func (d *doctor) ok(what, msg string, args ...any) {
	d.line("ok    ", what, msg, args...)
}

func (d *doctor) warn(what, msg string, args ...any) {
	d.line("warn  ", what, msg, args...)
}

func (d *doctor) fail(what, msg string, args ...any) {
	d.failed++
	d.line("FAIL  ", what, msg, args...)
}

func (d *doctor) skip(what, msg string, args ...any) {
	d.line("skip  ", what, msg, args...)
}

// cmdDoctor implements `opentalon doctor [--channels] [--offline]`: the
// config, the providers (one tiny request each, unless --offline), each
// enabled channel's credentials (one harmless platform call per token, only
// with --channels), the database's integrity, file permissions and free
// disk space. It exits 1 when a check failed.
func cmdDoctor(ctx context.Context, g *globalFlags, args []string, io Stdio, env config.Env, log *slog.Logger) error {
	var channels, offline bool
	rest, err := parseSub("doctor", g, args, io, func(fs *flag.FlagSet) {
		fs.BoolVar(&channels, "channels", false, "check each enabled channel's credentials with harmless platform calls (one per token)")
		fs.BoolVar(&offline, "offline", false, "make no network call (no provider request)")
	})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Sprintf("doctor takes no arguments, got %q; %s", rest, doctorUsage)}
	}
	d := &doctor{out: io.Out}
	cfg, src, err := loadConfig(g, env)
	if err != nil {
		d.fail("config", "%v", err)
		return fmt.Errorf("1 check failed: the config does not load; fix it and run doctor again")
	}
	d.ok("config", "%s loads; %d channel(s) enabled, %d provider(s)", src, len(enabledChannels(cfg)), len(cfg.Models.Providers))
	quiet := slog.New(slog.DiscardHandler)
	d.startChecks(ctx, cfg)
	d.dataDir(cfg)
	d.database(ctx, cfg)
	d.profiles(cfg)
	d.plugins(cfg)
	d.diskSpace(cfg)
	if offline {
		d.skip("providers", "--offline: no request sent")
	} else {
		d.providers(ctx, cfg, quiet)
	}
	d.channels(ctx, cfg, channels, quiet)
	if d.failed > 0 {
		return fmt.Errorf("%d check(s) failed; see the FAIL lines above for the fix", d.failed)
	}
	fmt.Fprintln(io.Out, "all checks passed")
	return nil
}

// startChecks runs what `opentalon run` checks before it serves, as
// `config check` does (preflight): a Lua script that does not compile, a
// plugins.tools.run_as user that does not exist, a plugin binary others
// may write, a bad schedule. Its warnings are those run logs at start.
func (d *doctor) startChecks(ctx context.Context, cfg *config.Config) {
	warnings, err := preflight(ctx, cfg)
	for _, w := range warnings {
		d.warn("start checks", "%s", w)
	}
	switch {
	case err != nil:
		d.fail("start checks", "opentalon run would refuse to start: %v", err)
	case len(warnings) == 0:
		d.ok("start checks", "what opentalon run checks before it serves passes (Lua scripts, plugins, schedules)")
	}
}

// groupOrOther says mode lets someone besides the owner read (mask 044)
// or write (022).
func groupOrOther(mode fs.FileMode, mask fs.FileMode) bool { return mode.Perm()&mask != 0 }

func (d *doctor) dataDir(cfg *config.Config) {
	dir := cfg.State.DataDir
	fi, err := os.Stat(dir)
	switch {
	case err != nil || !fi.IsDir():
		switch uerr := dataDirUsable(dir); {
		case uerr == nil:
			d.ok("data dir", "%s does not exist yet; opentalon run creates it (mode 0700)", dir)
		case errors.Is(uerr, syscall.ENOTDIR):
			d.fail("data dir", "%v; set state.data_dir to a directory", uerr)
		default:
			d.fail("data dir", "%v; give the user running opentalon write access, or set state.data_dir", uerr)
		}
		return
	}
	probe, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		d.fail("data dir", "%s is not writable (%v); give the user running opentalon write access, or set state.data_dir", dir, err)
		return
	}
	probe.Close()
	os.Remove(probe.Name())
	mode := fi.Mode().Perm()
	db := filepath.Join(dir, store.FileName)
	dbInfo, dbErr := os.Stat(db)
	switch {
	case groupOrOther(mode, 0o022):
		d.fail("data dir", "%s has mode %04o: others can replace the database in it; run: chmod 700 %s", dir, mode, dir)
	case groupOrOther(mode, 0o011) && dbErr == nil && groupOrOther(dbInfo.Mode(), 0o044):
		d.fail("data dir", "%s (mode %04o) lets others read %s (mode %04o), which holds the conversations; run: chmod 700 %s", dir, mode, db, dbInfo.Mode().Perm(), dir)
	case groupOrOther(mode, 0o077):
		// Others may list it; the files that hold conversations are the
		// owner's alone (the database is created 0600).
		d.ok("data dir", "%s is writable (mode %04o: others may list it, not read the database; chmod 700 %s hides it whole)", dir, mode, dir)
	default:
		d.ok("data dir", "%s is writable and private (mode %04o)", dir, mode)
	}
}

func (d *doctor) database(ctx context.Context, cfg *config.Config) {
	if cfg.State.Driver == config.DriverPostgres {
		d.postgres(ctx, cfg)
		return
	}
	path := filepath.Join(cfg.State.DataDir, store.FileName)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		d.ok("database", "%s does not exist yet; opentalon run creates it", path)
		return
	}
	if err != nil {
		d.fail("database", "%s: %v", path, err)
		return
	}
	db, err := store.OpenFile(ctx, path, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if core.ErrorKind(err) == core.KindInvalid {
		// It names its own fix (a newer release's schema: upgrade, or
		// restore a backup taken before).
		d.fail("database", "%v", err)
		return
	}
	if err != nil {
		d.fail("database", "%v; restore a backup with: opentalon restore FILE", err)
		return
	}
	defer db.Close()
	probs, err := db.QuickCheck(ctx)
	switch {
	case err != nil:
		d.fail("database", "%v; restore a backup with: opentalon restore FILE", err)
	case len(probs) > 0:
		d.fail("database", "PRAGMA quick_check found %d problem(s), first: %s; restore a backup with: opentalon restore FILE", len(probs), probs[0])
	default:
		d.ok("database", "%s passes PRAGMA quick_check (%s)", path, humanBytes(fi.Size()))
	}
}

func (d *doctor) profiles(cfg *config.Config) {
	path := profilesPath(cfg)
	if cfg.Auth.ProfilesFile == "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			d.ok("profiles file", "none (auth.profiles_file unset; providers use their api_key)")
			return
		}
	}
	profiles, err := routing.LoadProfilesFile(path)
	if err != nil {
		d.fail("profiles file", "%v", err)
		return
	}
	n := 0
	for _, ps := range profiles {
		n += len(ps)
	}
	d.ok("profiles file", "%s is private and holds %d profile(s)", path, n)
}

func (d *doctor) plugins(cfg *config.Config) {
	tc := cfg.Plugins.Tools
	if tc.PluginDir == "" && len(tc.Plugins) == 0 {
		d.ok("plugins", "none configured")
		return
	}
	if dir := tc.PluginDir; dir != "" {
		fi, err := os.Stat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) && dataDirUsable(dir) == nil:
			d.ok("plugin dir", "%s does not exist yet; opentalon run creates it", dir)
		case err != nil:
			d.fail("plugin dir", "%v; create it or fix plugins.tools.plugin_dir", err)
		case !fi.IsDir():
			d.fail("plugin dir", "%s is not a directory; fix plugins.tools.plugin_dir", dir)
		case groupOrOther(fi.Mode(), 0o022):
			d.fail("plugin dir", "%s has mode %04o: others can put programs in it that opentalon would run; run: chmod go-w %s", dir, fi.Mode().Perm(), dir)
		default:
			d.ok("plugin dir", "%s is writable by its owner only", dir)
		}
	}
	for i, p := range tc.Plugins {
		key := fmt.Sprintf("plugins.tools.plugins[%d]", i)
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			d.fail("plugin", "%s: %v; fix %s", p, err, key)
		case fi.Mode().Perm()&0o111 == 0:
			d.fail("plugin", "%s is not executable; run: chmod +x %s", p, p)
		case groupOrOther(fi.Mode(), 0o022):
			d.fail("plugin", "%s has mode %04o: others can replace the program opentalon runs; run: chmod go-w %s", p, fi.Mode().Perm(), p)
		default:
			d.ok("plugin", "%s is executable", p)
		}
	}
}

func (d *doctor) diskSpace(cfg *config.Config) {
	dir := cfg.State.DataDir
	for {
		if _, err := os.Stat(dir); err == nil || dir == filepath.Dir(dir) {
			break
		}
		dir = filepath.Dir(dir) // not created yet: the disk it will be on
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		d.warn("disk space", "cannot read the free space of %s: %v", dir, err)
		return
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	switch {
	case free < minFreeBytes:
		d.fail("disk space", "only %s free on the file system of %s; free some space (the queue stops accepting messages when the disk is full)", humanBytes(free), dir)
	case free < warnFreeBytes:
		d.warn("disk space", "%s free on the file system of %s; less than 1 GiB", humanBytes(free), dir)
	default:
		d.ok("disk space", "%s free on the file system of %s", humanBytes(free), dir)
	}
}

// providers sends each configured provider one tiny request with its
// first credential.
func (d *doctor) providers(ctx context.Context, cfg *config.Config, log *slog.Logger) {
	clients, err := buildProviders(cfg, log, time.Now, nil)
	if err != nil {
		d.fail("providers", "%v", err)
		return
	}
	profiles, _ := authProfiles(cfg) // a bad file is reported above
	for _, id := range slices.Sorted(maps.Keys(clients)) {
		what := "provider " + id
		if p := cfg.Models.Providers[id]; p.API == config.APIPlugin {
			d.skip(what, "served by plugin %s, which only opentalon run starts", p.Plugin)
			continue
		}
		model := doctorModel(cfg, id)
		if model == "" {
			d.skip(what, "no model of it in models.catalog or its models list to ask")
			continue
		}
		var cred provider.Credentials
		if ps := profiles[id]; len(ps) > 0 {
			cred = provider.Credentials{APIKey: string(ps[0].Key), OAuth: ps[0].OAuth}
		} else if k := cfg.Models.Providers[id].APIKey; k.IsSet() {
			cred.APIKey = k.Value()
		}
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		t0 := time.Now()
		_, err := clients[id].Complete(cctx, cred, &provider.Request{Model: model,
			Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "Reply with the word OK."}}, MaxTokens: 16})
		cancel()
		if err != nil {
			msg := err.Error()
			switch pc := cfg.Models.Providers[id]; {
			case pc.KeyVar != "" || pc.URLVar != "":
				// Made from the environment: the fix is a variable, not
				// a config key the user does not have.
				msg = envProviderFailure(id, pc, err)
			case !strings.Contains(msg, "models.providers."+id):
				msg += "; " + providerFix(id, err)
			}
			d.fail(what, "%s/%s: %s", id, model, msg)
			continue
		}
		d.ok(what, "%s/%s answered in %s", id, model, time.Since(t0).Round(time.Millisecond))
	}
	// The catalog's models against each provider's list of the models it
	// serves (the request above tried one of them only).
	for _, p := range checkProviders(ctx, cfg, checkTimeout) {
		if !p.Fatal {
			d.warn("provider "+p.Provider, "%s", p.Msg)
		}
	}
}

// doctorModel is the model of provider id to ask: routing.primary when it
// is one of the provider's, else its first catalog entry, else the first
// of its models list.
func doctorModel(cfg *config.Config, id string) string {
	if ref, ok := cfg.ResolveModel(cfg.Routing.Primary); ok {
		if p, m, _ := strings.Cut(ref, "/"); p == id {
			return m
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(cfg.Models.Catalog)) {
		if p, m, _ := strings.Cut(ref, "/"); p == id {
			return m
		}
	}
	if ms := cfg.Models.Providers[id].Models; len(ms) > 0 {
		return ms[0].ID
	}
	return ""
}

// envProviderFailure says what failed of a provider made from the
// environment and which variable fixes it.
func envProviderFailure(id string, p config.Provider, err error) string {
	cause := err
	var ce *core.Error
	if errors.As(err, &ce) && ce.Err != nil {
		cause = ce.Err
	}
	switch core.ErrorKind(err) {
	case core.KindAuth:
		return fmt.Sprintf("the key was refused (%v); %s", cause, keyFix(id, p))
	case core.KindUnavailable, core.KindTimeout:
		return fmt.Sprintf("cannot reach the server (%v); %s", cause, urlFix(id, p))
	case core.KindNotFound, core.KindBadRequest:
		return fmt.Sprintf("%v; the model may not exist there: set OPENTALON_MODEL to one it serves", cause)
	}
	return fmt.Sprintf("%v; %s", cause, providerFix(id, err))
}

func providerFix(id string, err error) string {
	switch core.ErrorKind(err) {
	case core.KindAuth:
		return "the key was refused: check models.providers." + id + ".api_key (or its profiles in auth.profiles_file)"
	case core.KindBilling:
		return "the account's quota or credit is used up: top it up with the provider"
	case core.KindNotFound, core.KindBadRequest:
		return "the model may not exist at this provider: check the catalog's model references"
	case core.KindRateLimited:
		return "the provider is rate limiting this key right now; try again later"
	}
	return "check models.providers." + id + ".base_url and that the server runs"
}

// channels checks each enabled channel's credential with one call, only
// when asked.
func (d *doctor) channels(ctx context.Context, cfg *config.Config, online bool, log *slog.Logger) {
	builds := channelBuilds()
	for _, name := range enabledChannels(cfg) {
		what := "channel " + name
		if !online {
			d.skip(what, "credential not checked (doctor --channels makes one harmless call to the platform per token)")
			continue
		}
		build, ok := builds[name]
		if !ok {
			d.fail(what, "not built in this version; set channels.%s.enabled: false", name)
			continue
		}
		ch, err := build(&App{cfg: cfg, log: log, opts: AppOptions{Now: time.Now, Stdin: strings.NewReader(""), Stdout: io.Discard}, eof: make(chan struct{})})
		if err != nil {
			d.fail(what, "%v", err)
			continue
		}
		cc, ok := ch.(core.CredentialChecker)
		if !ok {
			d.ok(what, "has no credential to check")
			ch.Close()
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		who, err := cc.CheckCredential(cctx)
		cancel()
		ch.Close()
		if err != nil {
			d.fail(what, "%v", err)
			continue
		}
		d.ok(what, "the platform accepts the credential (%s)", who)
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// postgres checks the PostgreSQL database of state.driver: postgres:
// that it answers (the DSN, the password, the database), the server's
// version, the schema version and every table, and the leased queue
// (its claims, leases past their end, work nothing would claim).
func (d *doctor) postgres(ctx context.Context, cfg *config.Config) {
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	// run would refuse a standby, so the check does too.
	db, err := openStoreToWrite(cctx, cfg, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		d.fail("database", "%v", err)
		return
	}
	defer db.Close()
	server, err := db.ServerVersion(cctx)
	if err != nil {
		d.fail("database", "%s answers but its version cannot be read: %v", db.Name(), err)
		return
	}
	version, _ := db.SchemaVersion(cctx)
	probs, err := db.QuickCheck(cctx)
	switch {
	case err != nil:
		d.fail("database", "%v", err)
	case len(probs) > 0:
		d.fail("database", "%s: %s; let a gateway of this version migrate it, or restore it with pg_restore", db.Name(), strings.Join(probs, "; "))
	default:
		d.ok("database", "%s answers (PostgreSQL %s), schema version %d, every table readable", db.Name(), server, version)
	}
	h, err := db.QueueHealth(cctx, time.Now())
	if err != nil {
		d.fail("queue", "%v", err)
		return
	}
	conv, most, err := db.MostRunningInOneConversation(cctx)
	switch {
	case err != nil:
		d.fail("queue", "%v", err)
	case h.Orphans > 0:
		d.fail("queue", "%d unfinished item(s) belong to no conversation head, so no replica would claim them (report this as a bug)", h.Orphans)
	case most > 1:
		d.fail("queue", "conversation %s has %d items running at once; per-conversation order is broken (report this as a bug)", conv, most)
	case h.Expired > 0:
		d.warn("queue", "%d claim(s) outlived their lease (queue.lease_ttl) and wait to be taken back: no gateway is claiming, or their replicas died; %d conversation(s) have work", h.Expired, h.Heads)
	default:
		d.ok("queue", "%d conversation(s) with work, %d running under leases of %d replica(s)", h.Heads, h.Running, h.Holders)
	}
}
