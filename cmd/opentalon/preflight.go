package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/plugins"
)

// preflight builds the gateway from cfg as `opentalon run` does and
// returns what run would refuse (the error) and the warnings it would log
// at start — without run's side effects: the database is a throwaway one
// in a temporary directory, no channel connects, no plugin starts and
// nothing reaches the network. `config check` is this, so it runs every
// validation run runs; the checks that need the network (the providers'
// model lists, the platforms' credentials) are doctor's.
func preflight(ctx context.Context, cfg *config.Config) (warnings []string, err error) {
	// The data directory run would use (without making it): a path
	// through a file works for no one; one this user may not write may
	// be meant for the user the service runs as.
	var dirWarning []string
	switch err := dataDirUsable(cfg.State.DataDir); {
	case errors.Is(err, syscall.ENOTDIR):
		return nil, dataDirNotDir(err)
	case err != nil:
		dirWarning = append(dirWarning, fmt.Sprintf("state.data_dir: %v; opentalon run as this user would refuse to start: give the user running it write access, or set state.data_dir", err))
	}
	tmp, err := scratchDir(cfg.State.DataDir)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rec := &warnRecorder{msgs: dirWarning}
	log := slog.New(rec)
	c := *cfg
	c.State.DataDir = tmp
	// A check says at once that the database is down; only run waits.
	c.State.Postgres.ConnectWait = 0
	app, err := BuildApp(ctx, &c, AppOptions{Stdin: strings.NewReader(""), Stdout: io.Discard, Logger: log})
	if err != nil {
		return rec.list(), err
	}
	defer app.Close()
	// What Run checks before it serves: the drop directories it creates,
	// the Lua scripts it loads, the plugins it would start and their
	// sandbox, and the config's schedules.
	missing, err := missingDropDirs(cfg, log)
	if err != nil {
		return rec.list(), err
	}
	if !isMissing(missing, cfg.Plugins.Lua.ScriptsDir) {
		if err := app.startLua(ctx); err != nil {
			return rec.list(), err
		}
	}
	tc := cfg.Plugins.Tools
	if tc.PluginDir != "" || len(tc.Plugins) > 0 {
		var specs []plugins.Spec
		for _, p := range tc.Plugins {
			specs = append(specs, plugins.Spec{Path: p})
		}
		dir := tc.PluginDir
		if isMissing(missing, dir) {
			dir = ""
		}
		if _, err := plugins.Discover(dir, specs); err != nil {
			return rec.list(), err
		}
		iso, err := plugins.NewIsolation(plugins.Sandbox{RunAs: tc.RunAs, Landlock: tc.Sandbox.Landlock,
			ReadPaths: tc.Sandbox.ReadPaths, WritePaths: tc.Sandbox.WritePaths})
		if err != nil {
			return rec.list(), err
		}
		iso.Describe(log, nil)
		// The directory of the plugins' sockets, which run makes before
		// it starts them (in the data directory, or the temporary one).
		err = plugins.CheckSocketRoot(cfg.State.DataDir, iso)
		iso.Close()
		if err != nil {
			return rec.list(), err
		}
	}
	if err := app.sched.SyncConfig(ctx, configSchedules(cfg)); err != nil {
		return rec.list(), fmt.Errorf("schedules: %w", err)
	}
	return rec.list(), nil
}

// scratchDir makes a temporary directory for preflight's database: in the
// temporary directory ($TMPDIR, else /tmp or /var/tmp when $TMPDIR names
// no directory, as for the plugins' sockets), else (a container without
// /tmp) beside the data.
func scratchDir(dataDir string) (string, error) {
	dir, err := os.MkdirTemp("", "opentalon-check-")
	if err == nil {
		return dir, nil
	}
	for _, tmp := range []string{"/tmp", "/var/tmp"} {
		if dir, err2 := os.MkdirTemp(tmp, "opentalon-check-"); err2 == nil {
			return dir, nil
		}
	}
	if fi, serr := os.Stat(dataDir); serr == nil && fi.IsDir() {
		if dir, err2 := os.MkdirTemp(dataDir, ".check-"); err2 == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("config check needs a scratch directory for a throwaway database: %w; set TMPDIR to a writable directory", err)
}

// warnRecorder is a slog.Handler that keeps the warnings and errors, each
// as its message followed by its attributes.
type warnRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	var attrs []string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "component" && a.Key != "channel" {
			attrs = append(attrs, a.String())
		}
		return true
	})
	msg := r.Message
	if len(attrs) > 0 {
		msg += " (" + strings.Join(attrs, ", ") + ")"
	}
	w.mu.Lock()
	w.msgs = append(w.msgs, msg)
	w.mu.Unlock()
	return nil
}

func (w *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnRecorder) WithGroup(string) slog.Handler      { return w }

func (w *warnRecorder) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}
