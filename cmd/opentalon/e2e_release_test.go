package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReleaseScriptEmbedsTheVersion runs scripts/release.sh for this
// machine's platform and checks the binary: static, and `version` prints
// the version given.
func TestReleaseScriptEmbedsTheVersion(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a release binary")
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "../../scripts/release.sh", "v9.8.7-test")
	cmd.Env = append(os.Environ(), "OUT="+out, "PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}
	bin := filepath.Join(out, "opentalon-v9.8.7-test-"+runtime.GOOS+"-"+runtime.GOARCH)
	b, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(b), "opentalon v9.8.7-test ") {
		t.Fatalf("%s version = %q, %v", bin, b, err)
	}
	if f, err := elf.Open(bin); err == nil {
		if f.Section(".interp") != nil {
			t.Errorf("%s needs a dynamic loader; a release binary is static", bin)
		}
		f.Close()
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS-v9.8.7-test"))
	if err != nil || !strings.Contains(string(sums), filepath.Base(bin)) {
		t.Fatalf("SHA256SUMS: %q %v", sums, err)
	}
	if b, err := exec.Command("sh", "../../scripts/release.sh", "v1 evil").CombinedOutput(); err == nil || !strings.Contains(string(b), "may hold only") {
		t.Errorf("a version with a space: %v %s", err, b)
	}
}
