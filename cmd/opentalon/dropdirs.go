package main

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"syscall"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// dropDir is a directory of the config an operator drops files into:
// plugin binaries, Lua scripts.
type dropDir struct {
	key, dir, what string
}

// dropDirs are the config's drop directories that are set.
func dropDirs(cfg *config.Config) []dropDir {
	var out []dropDir
	if d := cfg.Plugins.Tools.PluginDir; d != "" {
		out = append(out, dropDir{"plugins.tools.plugin_dir", d, "put the plugin binaries there (they start at the next start)"})
	}
	if d := cfg.Plugins.Lua.ScriptsDir; d != "" {
		what := "put the .lua scripts there (they load at the next start)"
		if cfg.Plugins.Lua.Watch {
			what = "put the .lua scripts there (they load without a restart)"
		}
		out = append(out, dropDir{"plugins.lua.scripts_dir", d, what})
	}
	return out
}

// missingDropDirs warns of each drop directory that does not exist,
// which run creates (seed 001's config, "./plugins" and "./scripts",
// works in a fresh directory), and returns them; config check and run
// refuse alike one that cannot be created (a file on the way, a parent
// this user may not write).
func missingDropDirs(cfg *config.Config, log *slog.Logger) ([]dropDir, error) {
	var out []dropDir
	for _, d := range dropDirs(cfg) {
		_, err := os.Stat(d.dir)
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			continue // there (or unreadable: the loaders say why)
		}
		if err := dataDirUsable(d.dir); err != nil {
			return nil, core.Errorf(core.KindInvalid, "%s %s: %w; create it, or set %s to another directory (\"\" for none)", d.key, d.dir, err, d.key)
		}
		log.Warn(d.key+" does not exist; opentalon run creates it, empty: "+d.what, "dir", d.dir)
		out = append(out, d)
	}
	return out, nil
}

// makeDropDirs creates the missing drop directories (warning of each),
// only the user may write (plugins refuse a directory others may write).
func makeDropDirs(cfg *config.Config, log *slog.Logger) error {
	missing, err := missingDropDirs(cfg, log)
	if err != nil {
		return err
	}
	for _, d := range missing {
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			return core.Errorf(core.KindInvalid, "create %s %s: %w (create it yourself, or set %s to \"\")", d.key, d.dir, err, d.key)
		}
	}
	return nil
}

// isMissing says dir is one of ds.
func isMissing(ds []dropDir, dir string) bool {
	for _, d := range ds {
		if d.dir == dir {
			return true
		}
	}
	return false
}
