package opentalon_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// toolTests are the tests that need a program beyond Go, by package, with
// the Debian package their skip line must name.
var toolTests = []struct {
	pkg, test, debian string
}{
	{"./plugins/examples/python", "TestPythonPlugin", "protobuf-compiler"},
	{"./cmd/opentalon", "TestStatusPageInChromium", "chromium"},
}

// TestReadmeTestCommandWithOnlyGo runs the tests that need optional tools
// on a PATH that holds only Go (the README's promise: `go test ./...`
// passes on a machine with Go alone): each is skipped with one line naming
// its Debian package, and under CI=true each fails instead.
func TestReadmeTestCommandWithOnlyGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the test binaries of two packages")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin")
	if _, err := os.Stat(filepath.Join(goBin, "go")); err != nil {
		t.Fatalf("no go binary in %s: %v", goBin, err)
	}
	var pkgs, names []string
	for _, tt := range toolTests {
		pkgs = append(pkgs, tt.pkg)
		names = append(names, tt.test)
	}
	run := func(ci string) (string, error) {
		args := append([]string{"test", "-count=1", "-v", "-run", "^(" + strings.Join(names, "|") + ")$"}, pkgs...)
		cmd := exec.Command(filepath.Join(goBin, "go"), args...)
		var env []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			switch k {
			case "PATH", "CI", "OPENTALON_CHROMIUM", "CGO_ENABLED", "GOFLAGS":
				continue
			}
			env = append(env, kv)
		}
		// Without a C compiler there is no cgo (and so no -race).
		cmd.Env = append(env, "PATH="+goBin, "CGO_ENABLED=0", "CI="+ci)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("")
	if err != nil {
		t.Fatalf("go test with only Go on PATH failed: %v\n%s", err, out)
	}
	for _, tt := range toolTests {
		re := regexp.MustCompile(`(?m)^=== (?:RUN|CONT)\s+` + tt.test + `\n\s+\S+_test\.go:\d+: needs [^\n]*apt-get install [^\n]*\b` +
			regexp.QuoteMeta(tt.debian) + `\b[^\n]*\n--- SKIP: ` + tt.test + ` `)
		if !re.MatchString(out) {
			t.Errorf("%s in %s: want a skip with one line naming apt-get install %s; output:\n%s", tt.test, tt.pkg, tt.debian, out)
		}
	}

	out, err = run("true")
	if err == nil {
		t.Fatalf("go test with only Go on PATH and CI=true passed; want the tool tests to fail:\n%s", out)
	}
	for _, tt := range toolTests {
		if !strings.Contains(out, "--- FAIL: "+tt.test+" ") || !strings.Contains(out, "apt-get install") {
			t.Errorf("CI=true: %s did not fail naming the package; output:\n%s", tt.test, out)
		}
	}
}
