package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissingSkipsOrFails runs this test binary again as a test that
// lacks a program, with and without CI=true.
func TestMissingSkipsOrFails(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		LookPath(t, "opentalon-no-such-tool", "no-such-package")
		t.Fatal("LookPath returned for a program that is not on PATH")
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP"},
		{"false", false, "--- SKIP"},
		{"true", true, "--- FAIL"},
		{"1", true, "--- FAIL"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissingSkipsOrFails$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.wantFail || !strings.Contains(string(out), tc.want) ||
			!strings.Contains(string(out), "needs opentalon-no-such-tool (not on $PATH): apt-get install no-such-package") {
			t.Errorf("CI=%q: err %v; output:\n%s", tc.ci, err, out)
		}
	}
	if p := LookPath(t, "go", "golang"); p == "" {
		t.Error("LookPath(go) returned no path")
	}
}
