package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// SourceKind says where the config came from.
type SourceKind string

// Config sources, in the order Resolve tries them.
const (
	SourceFlag    SourceKind = "flag"    // --config FILE
	SourceEnv     SourceKind = "env"     // $OPENTALON_CONFIG
	SourceHome    SourceKind = "home"    // ~/.opentalon/config.yaml
	SourceDefault SourceKind = "default" // no file: the embedded default
)

// Source is the config that Resolve chose.
type Source struct {
	Kind SourceKind
	Path string // empty for SourceDefault
}

// String describes the source for `opentalon config check`.
func (s Source) String() string {
	switch s.Kind {
	case SourceFlag:
		return s.Path + " (from --config)"
	case SourceEnv:
		return s.Path + " (from $OPENTALON_CONFIG)"
	case SourceHome:
		return s.Path + " (default location)"
	}
	return "embedded default (no config file; provider from ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL)"
}

// HomeConfig is the default config location below the home directory.
const HomeConfig = ".opentalon/config.yaml"

// Resolve picks the config file: flagPath (from --config) when set, else
// $OPENTALON_CONFIG, else <home>/.opentalon/config.yaml when it exists, else
// the embedded default. A file named explicitly must exist.
func Resolve(flagPath string, env Env, home string) (Source, error) {
	if flagPath != "" {
		return explicit(SourceFlag, flagPath, "--config")
	}
	if p, ok := env("OPENTALON_CONFIG"); ok && p != "" {
		return explicit(SourceEnv, p, "$OPENTALON_CONFIG")
	}
	if home != "" {
		p := filepath.Join(home, HomeConfig)
		if _, err := os.Stat(p); err == nil {
			return Source{Kind: SourceHome, Path: p}, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return Source{}, fmt.Errorf("config %s: %w", p, err)
		}
	}
	return Source{Kind: SourceDefault}, nil
}

func explicit(kind SourceKind, path, by string) (Source, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Source{}, fmt.Errorf("config file %s (named by %s) does not exist; fix the path or create the file (see examples/config.yaml): %w", path, by, err)
		}
		return Source{}, fmt.Errorf("config file %s (named by %s): %w", path, by, err)
	}
	return Source{Kind: kind, Path: path}, nil
}

// FromSource loads the config a Source names.
func FromSource(src Source, env Env) (*Config, error) {
	if src.Kind == SourceDefault {
		return LoadDefault(env)
	}
	return Load(src.Path, env)
}

// Open resolves and loads in one step: the usual entry point for cmd.
// The home directory comes from $HOME in env, else the OS.
func Open(flagPath string, env Env) (*Config, Source, error) {
	src, err := Resolve(flagPath, env, homeDir(env))
	if err != nil {
		return nil, Source{}, err
	}
	cfg, err := FromSource(src, env)
	return cfg, src, err
}

// OpenFor is Open for a command that uses only the config keys under the
// given paths (such as "state" or "server.listen"), as the commands that
// work on the database do: what is wrong elsewhere — no LLM provider
// configured, a variable a channel's token needs left unset — does not
// stop it. A problem that names no key (the YAML does not parse, an
// unknown key, which may be a misspelled one the command needs) still
// does.
func OpenFor(flagPath string, env Env, paths ...string) (*Config, Source, error) {
	src, err := Resolve(flagPath, env, homeDir(env))
	if err != nil {
		return nil, Source{}, err
	}
	var cfg *Config
	var ps *problems
	if src.Kind == SourceDefault {
		cfg, ps, _ = loadDefault(env)
	} else {
		data, err := os.ReadFile(src.Path)
		if err != nil {
			return nil, src, fmt.Errorf("read config %s: %w", src.Path, err)
		}
		abs, err := filepath.Abs(src.Path)
		if err != nil {
			return nil, src, fmt.Errorf("config %s: %w", src.Path, err)
		}
		cfg, ps = parse(src.Path, data, filepath.Dir(abs), env)
	}
	kept := ps.list[:0]
	for _, p := range ps.list {
		if p.Path == "" || underAny(p.Path, paths) {
			kept = append(kept, p)
		}
	}
	ps.list = kept
	if err := ps.err(); err != nil {
		return nil, src, &core.Error{Kind: core.KindInvalid, Err: err}
	}
	return cfg, src, nil
}

// underAny reports whether key path p is one of paths or below one.
func underAny(p string, paths []string) bool {
	for _, q := range paths {
		if p == q || strings.HasPrefix(p, q+".") || strings.HasPrefix(p, q+"[") {
			return true
		}
	}
	return false
}
