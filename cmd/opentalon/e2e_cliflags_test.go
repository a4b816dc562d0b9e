package main

// An unknown flag or argument is one line on stderr naming the command's
// usage, exit 2, for every subcommand alike.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCLIUnknownFlagIsOneUsageLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--nope"}, "doctor: flag provided but not defined: -nope; usage: opentalon doctor [--channels] [--offline]"},
		{[]string{"healthcheck", "--nope"}, "healthcheck: flag provided but not defined: -nope; usage: opentalon healthcheck"},
		{[]string{"run", "--nope"}, "usage: opentalon [run]"},
		{[]string{"complete", "--nope", "hi"}, "usage: opentalon complete [--model REF] PROMPT"},
		{[]string{"config", "check", "--nope"}, "usage: opentalon config check"},
		{[]string{"backup", "--nope", "x.db"}, "usage: opentalon backup FILE"},
		{[]string{"restore", "--nope", "x.db"}, "usage: opentalon restore FILE"},
		{[]string{"lua", "test", "--nope", "x.lua"}, "usage: opentalon lua test SCRIPT"},
		{[]string{"state", "migrate", "--nope"}, "usage: opentalon state migrate --from sqlite --to postgres"},
	} {
		res := runMain(t, nil, "", tc.args...)
		if res.code != 2 || res.stdout != "" || !strings.Contains(res.stderr, tc.want) ||
			strings.Contains(res.stderr, "Usage of") || strings.Count(res.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant one line with %q", tc.args, res.code, res.stdout, res.stderr, tc.want)
		}
	}
}

func TestCLIVersionRefusesArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version", "extra"}, {"version", "--nope"}} {
		res := runMain(t, nil, "", args...)
		if res.code != 2 || res.stdout != "" || !strings.Contains(res.stderr, "usage: opentalon version") {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q", args, res.code, res.stdout, res.stderr)
		}
	}
	if res := runMain(t, nil, "", "version", "--log-level", "warn"); res.code != 0 || !strings.HasPrefix(res.stdout, "opentalon ") {
		t.Errorf("version --log-level warn: exit %d, %q, %q", res.code, res.stdout, res.stderr)
	}
}

// memory and session check their command line before the config and the
// database, as usage, affinity and plugins do: a wrong word creates no
// database, and a broken config does not hide it.
func TestCLIMemoryArgumentsBeforeDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, "state:\n  data_dir: "+dir+"\n")
	for _, args := range [][]string{
		{"memory", "frob"}, {"memory", "list", "extra"}, {"memory", "list", "--nope"},
		{"session", "frob"}, {"session", "export", "--nope", "console:local"},
	} {
		res := runMain(t, nil, "", append([]string{"--config", path}, args...)...)
		if res.code != 2 || !strings.Contains(res.stderr, "usage: opentalon ") || strings.Contains(res.stderr, "created the database") {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q", args, res.code, res.stdout, res.stderr)
		}
		res = runMain(t, nil, "", append([]string{"--config", filepath.Join(dir, "missing.yaml")}, args...)...)
		if res.code != 2 || !strings.Contains(res.stderr, "usage: opentalon ") {
			t.Errorf("%v with a missing config: exit %d\nstderr %q", args, res.code, res.stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused command line left %v in the data directory", entries)
	}
}

// A command that takes no arguments names what it got and its usage.
func TestCLINoArgumentsNamesUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"healthcheck", "extra"}, `healthcheck takes no arguments, got ["extra"]; usage: opentalon healthcheck`},
		{[]string{"run", "extra"}, `run takes no arguments, got ["extra"]; usage: opentalon [run]`},
		{[]string{"doctor", "extra"}, `doctor takes no arguments, got ["extra"]; usage: opentalon doctor`},
		{[]string{"version", "extra"}, `version takes no arguments, got ["extra"]; usage: opentalon version`},
	} {
		if res := runMain(t, nil, "", tc.args...); res.code != 2 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, res.code, res.stderr, tc.want)
		}
	}
}

// An unknown flag before any command reads like an unknown command.
func TestCLIUnknownTopLevelFlag(t *testing.T) {
	t.Parallel()
	res := runMain(t, nil, "", "--nope")
	if res.code != 2 || res.stdout != "" || !strings.HasPrefix(res.stderr, "opentalon: flag provided but not defined: -nope\n\n") ||
		!strings.Contains(res.stderr, "Usage:") {
		t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

// A wrong subcommand, a missing or a stray argument, or an unsupported
// driver is named in the error's first line, with the usage; exit 2, and
// nothing is opened or created (no database in the data directory).
func TestCLISubcommandErrorsNameTheProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, "state:\n  data_dir: "+dir+"\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pair"}, `pair: missing the subcommand (list, approve or deny); usage: opentalon pair list`},
		{[]string{"pair", "list", "extra"}, `pair list takes no arguments, got ["extra"]; usage: opentalon pair list`},
		{[]string{"pair", "approve"}, `pair approve: missing the CODE; usage: opentalon pair list`},
		{[]string{"pair", "deny", "a", "b"}, `pair deny takes one CODE, got ["a" "b"]; usage: opentalon pair list`},
		{[]string{"config"}, `config: missing the subcommand (check); usage: opentalon config check`},
		{[]string{"config", "frob"}, `config: unknown subcommand "frob" (check); usage: opentalon config check`},
		{[]string{"config", "check", "extra"}, `config check takes no arguments, got ["extra"]; usage: opentalon config check`},
		{[]string{"session", "frob"}, `session: unknown subcommand "frob" (export); usage: opentalon session export`},
		{[]string{"session", "export"}, `session export: missing the CONVERSATION; usage: opentalon session export`},
		{[]string{"session", "export", "a:b", "c:d"}, `session export takes one CONVERSATION, got ["a:b" "c:d"]; usage: opentalon session export`},
		{[]string{"state"}, `state: missing the subcommand (migrate); usage: opentalon state migrate`},
		{[]string{"state", "migrate", "--from", "mysql"}, `state migrate: --from "mysql" is not supported (supported: sqlite); usage: opentalon state migrate`},
		{[]string{"state", "migrate", "--from", "sqlite", "--to", "mysql"}, `state migrate: --to "mysql" is not supported (supported: postgres); usage: opentalon state migrate`},
		{[]string{"state", "migrate", "--from", "sqlite"}, `state migrate: give both --from sqlite and --to postgres; usage: opentalon state migrate`},
		{[]string{"state", "migrate", "--from", "sqlite", "--to", "postgres", "extra"}, `state migrate takes no arguments, got ["extra"]; usage: opentalon state migrate`},
		{[]string{"memory"}, "memory: missing the subcommand (list, search, delete or export)\nusage: opentalon memory list"},
		{[]string{"memory", "delete", "1", "x"}, `memory delete: "x" is not a memory id (a number); nothing was deleted`},
		{[]string{"plugins"}, `plugins: missing the subcommand (list or unbind); usage: opentalon plugins list`},
		{[]string{"plugins", "frob"}, `plugins: unknown subcommand "frob" (list or unbind); usage: opentalon plugins list`},
		{[]string{"plugins", "list", "extra"}, `plugins list takes no arguments, got ["extra"]; usage: opentalon plugins list`},
		{[]string{"plugins", "unbind"}, `plugins unbind: missing the NAME; usage: opentalon plugins list`},
		{[]string{"affinity"}, `affinity: missing the subcommand (show or reset); usage: opentalon affinity show`},
		{[]string{"bench", "frob"}, `bench: unknown subcommand "frob" (route); usage: opentalon bench route`},
		{[]string{"lua"}, `lua: missing the subcommand (test); usage: opentalon lua test SCRIPT`},
		{[]string{"lua", "test", "--message", "hi"}, `lua test: missing the SCRIPT; usage: opentalon lua test SCRIPT`},
		{[]string{"backup"}, `backup: missing the FILE; usage: opentalon backup FILE`},
		{[]string{"restore", "a", "b"}, `restore takes one FILE, got ["a" "b"]; usage: opentalon restore FILE`},
		{[]string{"complete"}, `complete: missing the PROMPT; usage: opentalon complete`},
		{[]string{"usage", "extra"}, `usage takes no arguments, got ["extra"]; usage: opentalon usage`},
		{[]string{"usage", "--frob"}, `usage: flag provided but not defined: -frob; usage: opentalon usage`},
		{[]string{"affinity", "show", "x"}, `affinity show takes no arguments, got ["x"]; usage: opentalon affinity show`},
		{[]string{"affinity", "reset", "--task"}, `affinity reset: flag needs an argument: -task; usage: opentalon affinity show`},
		{[]string{"memory", "export", "--format", "xml"}, "memory export --format \"xml\": use yaml or json\nusage: opentalon memory list"},
		{[]string{"session", "export", "--format", "xml", "console:local"}, `session export --format "xml": use yaml or json` + "\nusage: opentalon session export"},
	} {
		res := runMain(t, nil, "", append([]string{"--config", path}, tc.args...)...)
		if res.code != 2 || res.stdout != "" || !strings.HasPrefix(res.stderr, "opentalon: "+tc.want) {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 2, stderr starting %q", tc.args, res.code, res.stdout, res.stderr, "opentalon: "+tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused command line left %v in the data directory", entries)
	}
}

// deleteRecorder is a memory store that records the deletes asked of it.
type deleteRecorder struct {
	argsOnly
	deleted []int64
}

func (d *deleteRecorder) DeleteMemory(_ context.Context, id int64, _ string, _ bool) (bool, error) {
	d.deleted = append(d.deleted, id)
	return true, nil
}

// memory delete checks every id before it deletes any: a typo in the
// second deletes nothing.
func TestCLIMemoryDeleteChecksIDsFirst(t *testing.T) {
	t.Parallel()
	var db deleteRecorder
	var out strings.Builder
	err := runMemory(context.Background(), &db, []string{"delete", "1", "x"}, &out)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"x" is not a memory id`) {
		t.Errorf("err %v; want a usage error naming \"x\"", err)
	}
	if len(db.deleted) != 0 || out.Len() != 0 {
		t.Errorf("deleted %v (out %q) before refusing the bad id", db.deleted, out.String())
	}
	if err := runMemory(context.Background(), &db, []string{"delete", "1", "#2"}, &out); err != nil || len(db.deleted) != 2 {
		t.Errorf("delete 1 #2: %v, deleted %v", err, db.deleted)
	}
}
