package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// Version is set at build time with -ldflags "-X main.Version=…".
var Version = "dev"

// Stdio are the process's standard streams.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// globalFlags are accepted before or after the subcommand.
type globalFlags struct {
	config    string
	logFormat string
	logLevel  string
}

// register adds the global flags to fs; values already set stay the
// defaults, so a subcommand's FlagSet keeps what the top level parsed.
func (g *globalFlags) register(fs *flag.FlagSet) {
	if g.logFormat == "" {
		g.logFormat = "text"
	}
	fs.StringVar(&g.config, "config", g.config, "config file (default $OPENTALON_CONFIG, else ~/.opentalon/config.yaml)")
	fs.StringVar(&g.logFormat, "log-format", g.logFormat, "log format: text or json")
	fs.StringVar(&g.logLevel, "log-level", g.logLevel, "log level: debug, info, warn, error (default info, or $OPENTALON_LOG_LEVEL)")
}

const usage = `opentalon — an LLM assistant for Slack, Discord, Telegram and the console

Usage:
  opentalon [run]                          start the gateway
  opentalon complete [--model REF] PROMPT  answer one prompt and exit
  opentalon config check                   validate and print the effective config (secrets redacted)
  opentalon usage [--json] [--since 24h|7d] [--by model|chat|user|purpose]
  opentalon affinity show [--json] | affinity reset [--task T] [--model M]
  opentalon bench route --scenario FILE [--seeds N] [--json]
  opentalon lua test SCRIPT --message TEXT [--metadata k=v] [--hook H] [--llm-fake REPLY]
                                           run one Lua hook with a sample ctx; print the result as JSON
  opentalon memory list|search|delete|export [--user CHANNEL:ID] [--tag T] ...
  opentalon session export [--format yaml|json] [--out FILE] CONVERSATION
  opentalon plugins list | plugins unbind NAME   plugin names and the binaries they belong to
  opentalon pair list | pair approve CODE | pair deny CODE
  opentalon queue [--json] [--status queued|running|failed|done|all] [--conversation CONV] [--limit N]
                                           the request queue (default: what waits or runs, and failures of the last 24h)
  opentalon queue show ID [--json]         one queue item in full: its message, last error, reply and what of it was sent
  opentalon doctor [--channels] [--offline]  check the config, providers, database, permissions, disk
  opentalon backup FILE                    copy the database consistently, also while the gateway runs (PostgreSQL: with pg_dump)
  opentalon restore FILE                   replace the database with a backup (the gateway must be stopped)
  opentalon state migrate --from sqlite --to postgres
                                           copy state.data_dir's database into state.postgres.dsn's (the gateway must be stopped)
  opentalon healthcheck                    exit 0 when the running gateway's /healthz answers (for containers)
  opentalon version

Global flags (before or after the subcommand):
  --config FILE      config file (default $OPENTALON_CONFIG, else ~/.opentalon/config.yaml;
                     without any, a built-in default reads ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL)
  --log-format F     text (default) or json
  --log-level L      debug, info (default), warn, error
`

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, io Stdio, lookup func(string) (string, bool)) int {
	var g globalFlags
	fs := flag.NewFlagSet("opentalon", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder)) // the error is printed below, named
	fs.Usage = func() {}               // printed below: asked for, to stdout
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(io.Out, usage)
			return 0
		}
		fmt.Fprintf(io.Err, "opentalon: %v\n\n%s", err, usage)
		return 2
	}
	rest := fs.Args()
	cmd := "run"
	if len(rest) > 0 {
		cmd, rest = rest[0], rest[1:]
	}
	// `opentalon CMD --help` and `opentalon help CMD`: the command's
	// lines of the usage, on stdout (so `| less` shows them).
	if cmd == "help" && len(rest) > 0 {
		cmd, rest = rest[0], []string{"--help"}
	}
	if cmd != "help" && wantsHelp(rest) {
		h, ok := commandHelp(cmd)
		if !ok {
			fmt.Fprintf(io.Err, "opentalon: unknown command %q\n\n%s", cmd, usage)
			return 2
		}
		fmt.Fprint(io.Out, h)
		return 0
	}
	env := config.Env(lookup)
	// The logger is made before the subcommand parses its flags, so the
	// log flags given after it ("complete --log-format json ...") are
	// read here too; the subcommand still parses them all.
	lg := g.logFlagsIn(rest)
	log, err := newLogger(io.Err, lg.logFormat, firstNonEmpty(lg.logLevel, getenv(env, "OPENTALON_LOG_LEVEL")))
	if err != nil {
		fmt.Fprintln(io.Err, "opentalon:", err)
		return 2
	}
	var runErr error
	switch cmd {
	case "run":
		runErr = cmdRun(ctx, &g, rest, io, env, log)
	case "complete":
		runErr = cmdComplete(ctx, &g, rest, io, env, log)
	case "config":
		runErr = cmdConfig(ctx, &g, rest, io, env)
	case "usage", "affinity", "bench", "pair":
		runErr = cmdRouting(ctx, cmd, &g, rest, io, env, log)
	case "lua":
		runErr = cmdLua(ctx, &g, rest, io, env, log)
	case "memory", "session":
		runErr = cmdMemory(ctx, cmd, &g, rest, io, env, log)
	case "queue":
		runErr = cmdQueue(ctx, &g, rest, io, env, log)
	case "plugins":
		runErr = cmdPlugins(ctx, &g, rest, io, env, log)
	case "doctor":
		runErr = cmdDoctor(ctx, &g, rest, io, env, log)
	case "backup":
		runErr = cmdBackup(ctx, &g, rest, io, env, log)
	case "restore":
		runErr = cmdRestore(ctx, &g, rest, io, env, log)
	case "state":
		runErr = cmdState(ctx, &g, rest, io, env, log)
	case "healthcheck":
		runErr = cmdHealthcheck(ctx, &g, rest, io, env, log)
	case "version":
		runErr = cmdVersion(&g, rest, io)
	case "help", "-h", "--help":
		fmt.Fprint(io.Out, usage)
	default:
		fmt.Fprintf(io.Err, "opentalon: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if runErr != nil {
		// An error may quote what a provider, a platform or the database
		// held: written safe for the terminal (termLines).
		fmt.Fprintln(io.Err, "opentalon:", termLines(runErr.Error()))
		if store.ReadOnlyRefusal(runErr) {
			// A command that writes, run against a standby: what
			// PostgreSQL says names neither the server nor the fix.
			fmt.Fprintln(io.Err, "opentalon:", store.ReadOnlyFix)
		}
		var ue usageError
		if errors.As(runErr, &ue) {
			return 2
		}
		var oe operatorError
		if errors.As(runErr, &oe) {
			fmt.Fprintf(io.Err, "opentalon: exit status %d: fix the configuration or credential named above, then start again; "+
				"restarting cannot get past it, so a service manager should not restart on this status (deploy/opentalon.service lists it in RestartPreventExitStatus)\n", exitConfig)
			return exitConfig
		}
		return 1
	}
	return 0
}

// exitConfig is the exit status of `run` for a problem only the operator
// can fix — the config, a credential the platform refused, a data
// directory it may not write (sysexits' EX_CONFIG). The systemd unit does
// not restart on it, so a wrong token is not retried every 5 s forever.
const exitConfig = 78

// operatorError marks an error of `run` that restarting cannot get past
// (Main exits with exitConfig).
type operatorError struct{ err error }

func (e operatorError) Error() string { return e.err.Error() }
func (e operatorError) Unwrap() error { return e.err }

// asOperatorError marks err as an operatorError when it is a config
// problem (core.KindInvalid), a refused credential (core.KindAuth), a
// file the process may not write (the data directory) or a path of the
// config that runs through a file (ENOTDIR: state.data_dir under one).
func asOperatorError(err error) error {
	switch {
	case err == nil:
		return nil
	case core.ErrorKind(err) == core.KindInvalid, core.ErrorKind(err) == core.KindAuth,
		errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOTDIR):
		return operatorError{err}
	}
	return err
}

// wantsHelp reports whether args ask for help (-h, -help, --help before
// a "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandHelp is the usage's lines for cmd (with their continuation
// lines) and the global flags; false for a command the usage lacks.
func commandHelp(cmd string) (string, bool) {
	lines := usageOf(cmd)
	if len(lines) == 0 {
		return "", false
	}
	if d := commandDetail(cmd); d != nil {
		lines = d
	}
	_, flags, _ := strings.Cut(usage, "\nGlobal flags")
	return "Usage:\n" + strings.Join(lines, "\n") + "\n\nGlobal flags" + flags, true
}

// commandDetail is the whole usage of a command whose line in usage is a
// summary that leaves out subcommands or flags (nil for the others): its
// --help shows what its own usage error would.
func commandDetail(cmd string) []string {
	switch cmd {
	case "memory":
		var lines []string
		for _, l := range strings.Split(strings.TrimPrefix(memoryUsage, "usage:"), "\n") {
			lines = append(lines, "  "+strings.TrimSpace(l))
		}
		return lines
	case "complete":
		return append(usageOf(cmd), "    --no-stream                            print the answer only once it is complete")
	case "lua":
		return append(usageOf(cmd), "    --channel C, --user U                  ctx.channel and ctx.user (default console, local)")
	}
	return nil
}

// usageOf is the usage's lines of the command cmd: each of its synopsis
// lines ("  opentalon cmd ...") with the indented lines that follow it.
func usageOf(cmd string) []string {
	head, _, _ := strings.Cut(usage, "\nGlobal flags")
	var lines []string
	in := false
	for _, l := range strings.Split(head, "\n") {
		switch {
		case strings.HasPrefix(l, "  opentalon "):
			f := strings.Fields(l)
			in = f[1] == cmd || cmd == "run" && f[1] == "[run]"
		case !strings.HasPrefix(l, "    "):
			in = false
		}
		if in {
			lines = append(lines, l)
		}
	}
	return lines
}

// extract takes the global flags out of args (for subcommands that parse
// their own flags) and returns the rest.
func (g *globalFlags) extract(args []string) []string {
	var rest []string
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		var dst *string
		switch {
		case !strings.HasPrefix(args[i], "-"):
		case name == "config":
			dst = &g.config
		case name == "log-format":
			dst = &g.logFormat
		case name == "log-level":
			dst = &g.logLevel
		}
		if dst == nil {
			rest = append(rest, args[i])
			continue
		}
		if !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		*dst = val
	}
	return rest
}

// logFlagsIn is g with the global flags found in args, a subcommand's
// arguments, up to a "--" that ends its flags.
func (g globalFlags) logFlagsIn(args []string) globalFlags {
	for i, a := range args {
		if a == "--" {
			args = args[:i]
			break
		}
	}
	g.extract(args)
	return g
}

// usageError marks a wrong command line (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// subUsageError is the usage error of cmd (a command with subcommands,
// such as "pair") given args, the words after it, with subs its
// subcommands: it names the missing or unknown subcommand; use is the
// command's "usage: ..." text.
func subUsageError(cmd string, args []string, subs, use string) error {
	if len(args) == 0 {
		return usageError{fmt.Sprintf("%s: missing the subcommand (%s); %s", cmd, subs, use)}
	}
	return usageError{fmt.Sprintf("%s: unknown subcommand %q (%s); %s", cmd, args[0], subs, use)}
}

// argCountError is the usage error of cmd given the positional arguments
// got where it takes n named name ("CODE"): the missing or stray ones.
func argCountError(cmd string, got []string, n int, name, use string) error {
	switch {
	case n == 0:
		return usageError{fmt.Sprintf("%s takes no arguments, got %q; %s", cmd, got, use)}
	case len(got) < n:
		return usageError{fmt.Sprintf("%s: missing the %s; %s", cmd, name, use)}
	}
	return usageError{fmt.Sprintf("%s takes one %s, got %q; %s", cmd, name, got, use)}
}

// flagsError is the usage error of cmd whose flags failed to parse
// (err) or that was given the positional arguments stray, which it does
// not take.
func flagsError(cmd string, err error, stray []string, use string) error {
	if err != nil {
		return usageError{fmt.Sprintf("%s: %v; %s", cmd, err, use)}
	}
	return argCountError(cmd, stray, 0, "", use)
}

// parseSub parses a subcommand's flags, accepting the global flags too.
func parseSub(name string, g *globalFlags, args []string, _ Stdio, define func(*flag.FlagSet)) ([]string, error) {
	fs := flag.NewFlagSet("opentalon "+name, flag.ContinueOnError)
	// The error alone, with the command's usage, not Go's dump of
	// every flag (the other subcommands' parsers do the same).
	fs.SetOutput(io.Discard)
	g.register(fs)
	if define != nil {
		define(fs)
	}
	// Go's flag package stops at the first positional argument; move flags
	// that follow positionals to the front so "complete 'hi' --model x" works.
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") {
				if f := fs.Lookup(name); f != nil {
					if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !bf.IsBoolFlag() {
						if i+1 < len(args) {
							flags = append(flags, args[i+1])
							i++
						}
					}
				}
			}
			continue
		}
		pos = append(pos, a)
	}
	if err := fs.Parse(flags); err != nil {
		return nil, usageError{fmt.Sprintf("%s: %v; usage: %s", name, err, usageLine(name))}
	}
	return append(fs.Args(), pos...), nil
}

// usageLine is the usage's synopsis of the command whose name starts
// cmd ("lua test" is lua's), without its description; several are
// joined with " | ".
func usageLine(cmd string) string {
	word, _, _ := strings.Cut(cmd, " ")
	var lines []string
	for _, l := range usageOf(word) {
		if strings.HasPrefix(l, "  opentalon ") {
			synopsis, _, _ := strings.Cut(strings.TrimSpace(l), "  ")
			lines = append(lines, synopsis)
		}
	}
	if len(lines) == 0 {
		return "opentalon help"
	}
	return strings.Join(lines, " | ")
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
		}
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("log format %q: use text or json", format)
}

// loadConfig finds and loads the config: --config, else $OPENTALON_CONFIG,
// else ~/.opentalon/config.yaml, else the built-in default from the
// environment. It returns a description of the source.
func loadConfig(g *globalFlags, env config.Env) (*config.Config, string, error) {
	cfg, src, err := config.Open(g.config, env)
	if err != nil {
		return nil, "", err
	}
	return cfg, src.String(), nil
}

// loadConfigFor loads the config for a command that uses only the keys
// under paths (config.OpenFor): what is wrong elsewhere, such as no LLM
// provider, does not stop it.
func loadConfigFor(g *globalFlags, env config.Env, paths ...string) (*config.Config, error) {
	cfg, _, err := config.OpenFor(g.config, env, paths...)
	return cfg, err
}

// openConfigStore loads the config and opens its database, for the
// subcommands that work on the store without running the gateway; they
// use the keys under state and those under keys.
func openConfigStore(ctx context.Context, g *globalFlags, env config.Env, log *slog.Logger, keys ...string) (*config.Config, *store.DB, error) {
	cfg, err := loadConfigFor(g, env, append(keys, "state")...)
	if err != nil {
		return nil, nil, err
	}
	db, err := openStore(ctx, cfg, store.Options{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

func getenv(env config.Env, k string) string {
	v, _ := env(k)
	return v
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// cmdVersion implements `opentalon version`.
func cmdVersion(g *globalFlags, args []string, io Stdio) error {
	rest, err := parseSub("version", g, args, io, nil)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Sprintf("version takes no arguments, got %q; usage: opentalon version", rest)}
	}
	fmt.Fprintln(io.Out, "opentalon", versionString())
	return nil
}

func versionString() string {
	v := Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		v += " (" + bi.GoVersion + ")"
	}
	return v
}

func cmdConfig(ctx context.Context, g *globalFlags, args []string, io Stdio, env config.Env) error {
	rest, err := parseSub("config", g, args, io, nil)
	if err != nil {
		return err
	}
	const use = "usage: opentalon config check [--config FILE]"
	if len(rest) == 0 || rest[0] != "check" {
		return subUsageError("config", rest, "check", use)
	}
	if len(rest) > 1 {
		return argCountError("config check", rest[1:], 0, "", use)
	}
	cfg, src, err := loadConfig(g, env)
	if err != nil {
		return err
	}
	// Everything run checks before it serves, and the warnings it logs.
	warnings, err := preflight(ctx, cfg)
	for _, w := range warnings {
		fmt.Fprintln(io.Err, "warning:", w)
	}
	if err != nil {
		return err
	}
	switch len(warnings) {
	case 0:
		fmt.Fprintf(io.Out, "# config: %s — OK\n", src)
	default:
		fmt.Fprintf(io.Out, "# config: %s — OK, with %d warning(s) on stderr (opentalon run logs them at start)\n", src, len(warnings))
	}
	return cfg.Print(io.Out)
}
