package main

// Help goes to stdout (issue 26, item 8): `opentalon --help | less` shows
// it, and a command's help shows that command's usage.

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestHelpGoesToStdout(t *testing.T) {
	// The binary itself, as `opentalon --help | less` runs it.
	cmd := exec.Command(os.Args[0], "--help")
	cmd.Env = append(os.Environ(), "OPENTALON_E2E_MAIN=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "opentalon doctor [--channels]") || stderr.Len() != 0 {
		t.Fatalf("opentalon --help: %v\nstdout %q\nstderr %q", err, out, stderr.String())
	}
	for _, tc := range []struct {
		args       []string
		want, fail string
	}{
		{[]string{"-h"}, "opentalon backup FILE", ""},
		{[]string{"help"}, "opentalon backup FILE", ""},
		{[]string{"doctor", "--help"}, "opentalon doctor [--channels] [--offline]", "opentalon backup"},
		{[]string{"help", "lua"}, "run one Lua hook with a sample ctx", "opentalon backup"},
		{[]string{"usage", "-h"}, "opentalon usage [--json] [--since 24h|7d] [--by model|chat|user|purpose]", "opentalon doctor"},
		{[]string{"run", "--help"}, "opentalon [run]", "opentalon doctor"},
		// A command whose line in the usage is a summary shows the rest:
		// its subcommands' forms and the flags the line leaves out.
		{[]string{"memory", "--help"}, "opentalon memory delete ID... | opentalon memory delete --user CHANNEL:ID --all", "opentalon doctor"},
		{[]string{"help", "memory"}, "opentalon memory search [--user CHANNEL:ID] [--tag T] [--limit N] [--json] WORDS...", "opentalon session"},
		{[]string{"complete", "-h"}, "--no-stream", "opentalon doctor"},
		{[]string{"lua", "test", "--help"}, "--channel C, --user U", "opentalon doctor"},
		{[]string{"queue", "--help"}, "opentalon queue show ID [--json]", "opentalon doctor"},
	} {
		res := runMain(t, nil, "", tc.args...)
		if res.code != 0 || !strings.Contains(res.stdout, tc.want) || res.stderr != "" ||
			tc.fail != "" && strings.Contains(res.stdout, tc.fail) || !strings.Contains(res.stdout, "--config FILE") {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q", tc.args, res.code, res.stdout, res.stderr)
		}
	}
	// A wrong flag or command is an error on stderr, with the usage.
	for _, args := range [][]string{{"--nope"}, {"frobnicate", "--help"}} {
		if res := runMain(t, nil, "", args...); res.code != 2 || res.stdout != "" || !strings.Contains(res.stderr, "Usage:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, res.code, res.stdout, res.stderr)
		}
	}
}

// A YAML mistake reaches the operator as file:line and the fix.
func TestYAMLMistakeNamesLineAndFix(t *testing.T) {
	path := writeConfig(t, "queue:\n  workers: four\n\tmax_attempts: 3\n")
	res := runMain(t, nil, "", "--config", path, "config", "check")
	if res.code == 0 || !strings.Contains(res.stderr, "config.yaml:3: this line holds a tab; YAML indents with spaces only") {
		t.Fatalf("exit %d, stderr %s", res.code, res.stderr)
	}
	path = writeConfig(t, "queue:\n  workers: four\n")
	res = runMain(t, nil, "", "--config", path, "config", "check")
	if res.code == 0 || !strings.Contains(res.stderr, `config.yaml:2: queue.workers: "four" is not a whole number: write one such as 4`) {
		t.Fatalf("exit %d, stderr %s", res.code, res.stderr)
	}
}
