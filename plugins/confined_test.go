package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runConfinedHelper is the test binary run by RunConfined.
func runConfinedHelper(what string) int {
	switch what {
	case "echo":
		_, _ = io.Copy(os.Stdout, os.Stdin)
	case "alloc":
		// Keeps what it allocates, until the address space runs out.
		var keep [][]byte
		for {
			b := make([]byte, 8<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
	case "spin":
		x := 0
		for {
			x++
		}
	case "sleep":
		time.Sleep(time.Hour)
	case "flood":
		b := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := os.Stdout.Write(b); err != nil {
				return 1
			}
		}
	case "refuse":
		fmt.Fprintln(os.Stderr, "some noise")
		fmt.Fprintln(os.Stderr, "the input is not what I read")
		return 3
	case "env":
		fmt.Print(strings.Join(os.Environ(), "\n"))
	case "uid":
		fmt.Print(os.Getuid())
	case "files":
		// Under Landlock nothing outside the program directories is
		// readable, and writing a file is refused by RLIMIT_FSIZE.
		if _, err := os.ReadFile("/etc/hostname"); err == nil {
			fmt.Print("read /etc/hostname;")
		}
		if f, err := os.CreateTemp("", "confined-*"); err == nil {
			fmt.Print("created ", f.Name(), ";")
			f.Close()
			os.Remove(f.Name())
		}
	}
	return 0
}

func confinedCmd(t *testing.T, what string) ConfinedCmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ConfinedCmd{Path: exe, Env: []string{envHelper + "=confined-" + what}}
}

func TestRunConfined(t *testing.T) {
	iso, err := NewIsolation(Sandbox{Landlock: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Run("echo", func(t *testing.T) {
		c := confinedCmd(t, "echo")
		c.Stdin = bytes.Repeat([]byte("abc"), 100000)
		out, err := iso.RunConfined(ctx, c, nil)
		if err != nil || !bytes.Equal(out, c.Stdin) {
			t.Fatalf("echo = %d bytes, %v; want the %d bytes of its input", len(out), err, len(c.Stdin))
		}
	})
	t.Run("no secrets in the environment", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", "sk-secret")
		out, err := iso.RunConfined(ctx, confinedCmd(t, "env"), nil)
		if err != nil || strings.Contains(string(out), "sk-secret") || !strings.Contains(string(out), envHelper) {
			t.Fatalf("env = %q, %v; want only the minimal environment and the command's own", out, err)
		}
	})
	for _, tc := range []struct {
		what, limit string
		tweak       func(*ConfinedCmd)
	}{
		{"alloc", LimitMemory, func(c *ConfinedCmd) { c.Memory = 256 << 20 }},
		{"spin", LimitCPU, func(c *ConfinedCmd) { c.CPUSeconds = 1 }},
		{"sleep", LimitTime, func(c *ConfinedCmd) { c.Timeout = 300 * time.Millisecond }},
		{"flood", LimitOutput, func(c *ConfinedCmd) { c.Output = 1 << 20 }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			c := confinedCmd(t, tc.what)
			tc.tweak(&c)
			_, err := iso.RunConfined(ctx, c, nil)
			var ce *ConfinedError
			if !errors.As(err, &ce) || ce.Limit != tc.limit {
				t.Fatalf("%s: err = %#v (%v); want the %s limit", tc.what, err, err, tc.limit)
			}
		})
	}
	t.Run("refusal", func(t *testing.T) {
		_, err := iso.RunConfined(ctx, confinedCmd(t, "refuse"), nil)
		var ce *ConfinedError
		if !errors.As(err, &ce) || ce.Limit != "" || ce.Code != 3 || ce.Message != "the input is not what I read" {
			t.Fatalf("err = %#v; want exit 3 with the last line of its standard error", err)
		}
	})
	t.Run("no files", func(t *testing.T) {
		if !iso.landlock() {
			t.Skip("no Landlock here")
		}
		out, err := iso.RunConfined(ctx, confinedCmd(t, "files"), nil)
		if err != nil || len(out) != 0 {
			t.Fatalf("files = %q, %v; want nothing read or written", out, err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		if _, err := iso.RunConfined(cctx, confinedCmd(t, "sleep"), nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want the caller's cancellation", err)
		}
	})
}

// TestConfinedHelperOutOfReachRunsFromACopy: with the core as root, a
// helper binary the run_as user cannot reach (this binary, in a 0700
// directory, as `go run` or a binary under /root is) runs as that user
// from a private copy, made once; Close removes it.
func TestConfinedHelperOutOfReachRunsFromACopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the core must run as root to run helpers as another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("this system has no user nobody: %v", err)
	}
	c := confinedCmd(t, "uid")
	data, err := os.ReadFile(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	c.Path = filepath.Join(t.TempDir(), "helper") // its parent is 0700
	if err := os.WriteFile(c.Path, data, 0o700); err != nil {
		t.Fatal(err)
	}
	iso, err := NewIsolation(Sandbox{RunAs: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { iso.Close() })
	run := func() {
		t.Helper()
		out, err := iso.RunConfined(context.Background(), c, nil)
		if err != nil || string(out) != nobody.Uid {
			t.Fatalf("the helper ran as uid %q (%v); want nobody's %s", out, err, nobody.Uid)
		}
	}
	run()
	run()
	if len(iso.stagedBins) != 1 {
		t.Fatalf("%d copies for one helper; want one, reused", len(iso.stagedBins))
	}
	// A cleaner of /tmp removes the copy: the next run makes another.
	for _, p := range iso.stagedBins {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	run()
	root := iso.stageRoot.dir
	if err := iso.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("the copy outlived Close: %v", err)
	}
	// After Close no copy is made (nothing would remove it).
	if _, err := iso.stagedHelper(c.Path, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a copy was made after Close")
	}
	// A temporary directory run_as cannot enter: no copy it cannot run.
	private := t.TempDir() // its parent is 0700
	t.Setenv("TMPDIR", private)
	iso2, err := NewIsolation(Sandbox{RunAs: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { iso2.Close() })
	if _, err := iso2.stagedHelper(c.Path, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "TMPDIR") {
		t.Fatalf("a copy in a temporary directory nobody cannot enter: %v; want a refusal naming TMPDIR", err)
	}
}

// TestOutOfMemoryWords: what a Go program says when the memory limit
// stops it, including a crash of its runtime during an allocation; other
// crashes are not the limit.
func TestOutOfMemoryWords(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   bool
	}{
		{"fatal error: runtime: out of memory\n\ngoroutine 1 [running]:", true},
		{"runtime: mmap: cannot allocate memory", true},
		{"SIGSEGV: segmentation violation\nPC=0x1 m=0 sigcode=1 addr=0x0\n\ngoroutine 0 [idle]:\nruntime.gcDrainN()\n\ngoroutine 1 [GC assist marking]:\nruntime.mallocgc(0x77359401, 0x1, 0x1)\nmain.main()", true},
		{"SIGSEGV: segmentation violation\nPC=0x1 m=0 sigcode=1 addr=0x0\n\ngoroutine 1 [running]:\nmain.parse()\nmain.main()", false},
		{"runtime: goroutine stack exceeds 67108864-byte limit\nfatal error: stack overflow", false},
		{"panic: index out of range", false},
	} {
		if got := outOfMemory(tc.stderr); got != tc.want {
			t.Errorf("outOfMemory(%.40q) = %v, want %v", tc.stderr, got, tc.want)
		}
	}
}
