package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// proc is the test binary re-executed as the opentalon binary.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	out   strings.Builder
	lines chan string
	done  chan struct{}
}

func startProcess(t *testing.T, cfgPath string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "--config", cfgPath, "--log-level", "warn", "run")
	cmd.Env = append(childEnv(), "OPENTALON_TEST_MAIN=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 100), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return p
}

func (p *proc) send(s string) {
	if _, err := io.WriteString(p.stdin, s+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proc) waitLine(want string) {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if l == want {
				return
			}
		case <-deadline:
			p.t.Fatalf("process never printed %q; output so far: %q", want, p.output())
		}
	}
}

// kill stops the process hard (SIGKILL), as a crash would.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
	<-p.done
}

func (p *proc) closeInput() { p.stdin.Close() }

// wait waits for a clean exit and returns the whole output.
func (p *proc) wait() string {
	p.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			p.t.Fatalf("process exited with %v; output %q", err, p.output())
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("process did not exit after its input closed; output %q", p.output())
	}
	<-p.done
	return p.output()
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
