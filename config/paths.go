package config

import (
	"os"
	"path/filepath"
	"strings"
)

// homeDir is $HOME from env, else the OS's idea of it.
func homeDir(env Env) string {
	if h, ok := env("HOME"); ok && h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// expandPath expands a leading "~" to home and makes a relative path
// absolute against base. An empty path stays empty.
func expandPath(p, base, home string) string {
	if p == "" {
		return ""
	}
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
		return filepath.Join(home, p[2:])
	}
	if filepath.IsAbs(p) || base == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// resolvePaths expands every filesystem path of the config.
func (c *Config) resolvePaths(base, home string) {
	c.State.DataDir = expandPath(c.State.DataDir, base, home)
	c.Auth.ProfilesFile = expandPath(c.Auth.ProfilesFile, base, home)
	c.Plugins.Tools.PluginDir = expandPath(c.Plugins.Tools.PluginDir, base, home)
	for i, p := range c.Plugins.Tools.Plugins {
		c.Plugins.Tools.Plugins[i] = expandPath(p, base, home)
	}
	for _, ps := range [][]string{c.Plugins.Tools.Sandbox.ReadPaths, c.Plugins.Tools.Sandbox.WritePaths} {
		for i, p := range ps {
			ps[i] = expandPath(p, base, home)
		}
	}
	c.Plugins.Lua.ScriptsDir = expandPath(c.Plugins.Lua.ScriptsDir, base, home)
}

// DBPath is the SQLite database file under state.data_dir.
func (c *Config) DBPath() string { return filepath.Join(c.State.DataDir, "opentalon.db") }
