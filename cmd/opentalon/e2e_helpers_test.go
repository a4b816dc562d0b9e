package main

// Shared helpers of the e2e_*_test.go files: the acceptance-suite view of
// the binary (config files on disk, Main with its exit code and streams,
// the re-executed test binary with its stderr captured).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/config"
)

// init lets the test binary be the real opentalon binary, main() with its
// signal handling included, when re-executed with OPENTALON_E2E_MAIN=1
// (TestMain's OPENTALON_TEST_MAIN=1 runs Main without signal handling).
func init() {
	if os.Getenv("OPENTALON_E2E_MAIN") == "1" {
		main()
	}
}

// writeConfig writes yaml to a fresh config.yaml and returns its path.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(withTestStore(t, yaml)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadConfigFile parses the config file at path the way the binary does.
func loadConfigFile(t testing.TB, path string) *config.Config {
	t.Helper()
	cfg, _, err := config.Open(path, config.MapEnv(nil))
	if err != nil {
		t.Fatalf("config %s: %v", path, err)
	}
	return cfg
}

// mainResult is one in-process run of Main.
type mainResult struct {
	code           int
	stdout, stderr string
}

// runMain runs the command line in-process with env as the whole
// environment and stdin as standard input.
func runMain(t testing.TB, env map[string]string, stdin string, args ...string) mainResult {
	t.Helper()
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Main(ctx, args, Stdio{In: strings.NewReader(stdin), Out: &out, Err: &errb}, lookup)
	return mainResult{code, out.String(), errb.String()}
}

// lockedBuf is a goroutine-safe buffer for a child's stderr.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuf) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// childEnv is the environment of a re-executed test binary: this one's,
// and unless GORACE is set, a race detector that does not sleep a second
// at exit (it waits for other goroutines' reports; -race children exit
// often here).
func childEnv() []string {
	env := os.Environ()
	if _, ok := os.LookupEnv("GORACE"); !ok {
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return env
}

// binProc is the test binary re-executed as opentalon with its stderr kept.
type binProc struct {
	*proc
	stderr *lockedBuf
}

// startBinary runs `opentalon args...` as a child process (the test
// binary running main()) with extraEnv added.
func startBinary(t *testing.T, extraEnv []string, args ...string) *binProc {
	t.Helper()
	return startBinaryAt(t, os.Args[0], childEnv(), extraEnv, args...)
}

// startBinaryEnv runs `opentalon args...` as a child process with env as
// its whole environment (a service manager's, a container's).
func startBinaryEnv(t *testing.T, env []string, args ...string) *binProc {
	t.Helper()
	return startBinaryAt(t, os.Args[0], env, nil, args...)
}

// startBinaryAt runs the binary at bin (the test binary, or one
// releaseBinary built) with env plus extraEnv as its environment.
func startBinaryAt(t *testing.T, bin string, env, extraEnv []string, args ...string) *binProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(append([]string(nil), env...), "OPENTALON_E2E_MAIN=1"), extraEnv...)
	return startCmd(t, cmd)
}

// startService runs `opentalon args...` as startBinary does, in a session
// of its own: with no controlling terminal, as a service manager or a
// container starts it (the test may run on a terminal).
func startService(t *testing.T, extraEnv []string, args ...string) *binProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(childEnv(), "OPENTALON_E2E_MAIN=1"), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return startCmd(t, cmd)
}

// startCmd starts cmd with its stdin and stdout on pipes and its stderr
// kept; it is killed when the test ends.
func startCmd(t *testing.T, cmd *exec.Cmd) *binProc {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &lockedBuf{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 0, 4096)
		rd := io.Reader(stdout)
		tmp := make([]byte, 4096)
		for {
			n, err := rd.Read(tmp)
			buf = append(buf, tmp[:n]...)
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				line := string(buf[:i])
				buf = buf[i+1:]
				p.mu.Lock()
				p.out.WriteString(line + "\n")
				p.mu.Unlock()
				p.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-p.done; cmd.Wait() })
	return &binProc{proc: p, stderr: errb}
}

// exitCode waits (up to timeout) for the process to end and returns its
// exit code; -1 means it was killed by a signal.
func (b *binProc) exitCode(timeout time.Duration) int {
	b.t.Helper()
	errc := make(chan error, 1)
	go func() { <-b.done; errc <- b.cmd.Wait() }()
	select {
	case <-errc:
		return b.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		// The cleanup's Wait must come after this one's, not beside it.
		b.cmd.Process.Kill()
		<-errc
		b.t.Fatalf("process did not exit within %s; stdout %q; stderr %q", timeout, b.output(), b.stderr.String())
	}
	return 0
}

// waitAddr waits for the in-process app's HTTP server address.
func waitAddr(t testing.TB, a *App) string {
	t.Helper()
	select {
	case addr := <-a.addr:
		return addr
	case <-time.After(20 * time.Second):
		t.Fatal("server did not listen")
	}
	return ""
}

// postJSON posts body to url with the given headers.
func postJSON(t testing.TB, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// release is the opentalon binary built as scripts/release.sh builds it
// (so its compiled packages are shared with the release test's build),
// once per test binary.
var release struct {
	once sync.Once
	bin  string
	err  error
}

// releaseBinary returns the opentalon binary built without the race
// detector, for a test whose child processes do much work: the crash
// loop. (The same code runs under -race in-process in the other tests.)
func releaseBinary(t testing.TB) string {
	t.Helper()
	release.once.Do(func() {
		dir, err := sharedDir()
		if err != nil {
			release.err = err
			return
		}
		release.bin = filepath.Join(dir, "opentalon")
		cmd := exec.Command("go", "build", "-trimpath", "-tags", releaseTags, "-o", release.bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			release.err = fmt.Errorf("go build -trimpath -tags %s: %v\n%s", releaseTags, err, out)
		}
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	return release.bin
}
