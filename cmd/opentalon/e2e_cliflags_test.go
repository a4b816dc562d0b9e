package main

// An unknown flag or argument is one line on stderr naming the command's
// usage, exit 2, for every subcommand alike.

import (
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
