package oneproc

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestOneP: linked in, the package leaves one P, unless GOMAXPROCS is
// set in the environment (checked by re-running this test with it set).
func TestOneP(t *testing.T) {
	want := 1
	if v, set := os.LookupEnv("GOMAXPROCS"); set {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("GOMAXPROCS=%q: %v", v, err)
		}
		want = n
	}
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("GOMAXPROCS = %d, want %d (GOMAXPROCS=%q in the environment)", got, want, os.Getenv("GOMAXPROCS"))
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOneP$", "-test.v")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=3")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOneP") {
		t.Fatalf("with GOMAXPROCS=3 set: %v\n%s", err, out)
	}
}
