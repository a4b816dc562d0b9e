package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// InCI reports whether the tests run in CI: $CI set to a true value
// (GitHub Actions, GitLab and .ci/run set CI=true).
func InCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Missing ends the test for want of something it needs: what names it
// and why it is missing; pkgs are the Debian packages that provide it.
// Outside CI the test is skipped with one line; under CI=true it fails.
func Missing(tb testing.TB, what, pkgs string) {
	tb.Helper()
	msg := fmt.Sprintf("needs %s: apt-get install %s (.ci/run installs it)", what, pkgs)
	if InCI() {
		tb.Fatalf("%s; CI=true, so a missing tool fails the test instead of skipping it", msg)
	}
	tb.Skip(msg)
}

// LookPath returns the path of the program name on $PATH, or ends the
// test with Missing naming the Debian package pkg.
func LookPath(tb testing.TB, name, pkg string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, name+" (not on $PATH)", pkg)
	}
	return p
}
