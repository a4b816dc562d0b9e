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
	// The README names the files the script writes, and git ignores them
	// where it writes them by default (dist/).
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dist/opentalon-v1.2.0-linux-amd64", "SHA256SUMS-v1.2.0"} {
		if !strings.Contains(string(readme), name) {
			t.Errorf("README.md does not name %s, which scripts/release.sh v1.2.0 writes", name)
		}
	}
	if _, err := exec.LookPath("git"); err == nil {
		if exec.Command("git", "rev-parse", "--is-inside-work-tree").Run() == nil {
			for _, f := range []string{"dist/opentalon-v1.2.0-linux-amd64", "dist/SHA256SUMS-v1.2.0"} {
				if err := exec.Command("git", "check-ignore", "-q", "../../"+f).Run(); err != nil {
					t.Errorf("git does not ignore %s (.gitignore): %v", f, err)
				}
			}
		}
	}
}

// MemoryDenyWriteExecute applies to the plugins too, and breaks those in
// languages that compile at run time, which docs/plugins.md promises.
func TestSystemdUnitLetsJITPluginsRun(t *testing.T) {
	u := readUnit(t)
	for _, v := range u["MemoryDenyWriteExecute"] {
		if v == "yes" || v == "true" || v == "1" {
			t.Errorf("deploy/opentalon.service sets MemoryDenyWriteExecute=%s: plugins in Node.js or Java cannot run under it", v)
		}
	}
}
