package main

// The console on a real terminal (issue 26, item 10): the binary runs on
// a pseudo-terminal as a newcomer runs it, and the test reads what the
// screen gets.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// openPTY opens a pseudo-terminal pair: the test holds the master, the
// child gets the slave as its terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here (/dev/ptmx: %v)", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal here (/dev/pts/%d: %v)", n, err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// screen collects what the terminal shows.
type screen struct {
	mu  sync.Mutex
	b   bytes.Buffer
	eof chan struct{}
}

func (s *screen) read(m *os.File) {
	defer close(s.eof)
	buf := make([]byte, 4096)
	for {
		n, err := m.Read(buf)
		s.mu.Lock()
		s.b.Write(buf[:n])
		s.mu.Unlock()
		if err != nil {
			return // EIO once the child and its terminal are gone
		}
	}
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *screen) waitFor(t *testing.T, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(s.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %s; it shows:\n%q", what, s.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConsoleOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	// The model takes a while: the waiting line counts the seconds.
	llm.SetReply(func(r providertest.Received) providertest.Script {
		time.Sleep(1500 * time.Millisecond)
		return providertest.Echo(r)
	})
	home := t.TempDir()
	port := freeLoopbackPort(t)
	cmd, master, scr := startOnTerminal(t, home, llm.BaseURL(), fmt.Sprintf("127.0.0.1:%d", port))

	logPath := filepath.Join(home, ".opentalon", "opentalon.log")
	scr.waitFor(t, "the banner and the prompt", func(s string) bool {
		return strings.Contains(s, fmt.Sprintf("OpenTalon on the console · model local/llama3.2 · logs in %s · status page http://127.0.0.1:%d/ · Ctrl-D quits", logPath, port)) &&
			strings.HasSuffix(s, "› ")
	})
	master.WriteString("hello terminal\r")
	scr.waitFor(t, "the answer and the prompt again", func(s string) bool {
		return strings.Contains(s, "echo: hello terminal\r\n› ")
	})
	if !regexp.MustCompile(`thinking… 1s`).MatchString(scr.String()) {
		t.Errorf("no waiting line counted the seconds while the model wrote:\n%q", scr.String())
	}
	master.Write([]byte{4}) // Ctrl-D
	<-scr.eof
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after Ctrl-D: %v\n%q", err, scr.String())
	}
	shown := scr.String()
	for _, logged := range []string{"level=", "msg=", "migration", "config loaded"} {
		if strings.Contains(shown, logged) {
			t.Errorf("the terminal shows a log line (%q):\n%q", logged, shown)
		}
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	logs := string(b)
	if !strings.Contains(logs, "config loaded") || strings.Count(logs, "created the database") != 1 || strings.Contains(logs, "applied database migration") {
		t.Errorf("log file %s; want the start-up lines, one line for the new database:\n%s", logPath, logs)
	}
	t.Logf("the terminal showed:\n%s", shown)
	if fi, err := os.Stat(logPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log file mode: %v %v; want 0600", fi.Mode(), err)
	}
}

// With server.listen on port 0 the banner names the port the OS picked,
// and the status page answers there.
func TestConsoleBannerNamesPickedPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	home := t.TempDir()
	cmd, master, scr := startOnTerminal(t, home, llm.BaseURL(), "127.0.0.1:0")

	banner := regexp.MustCompile(`· status page (http://127\.0\.0\.1:([0-9]+)/) · Ctrl-D quits`)
	scr.waitFor(t, "the banner with the status page and the prompt", func(s string) bool {
		return banner.MatchString(s) && strings.HasSuffix(s, "› ")
	})
	m := banner.FindStringSubmatch(scr.String())
	if m[2] == "0" {
		t.Fatalf("the banner names port 0: %q", scr.String())
	}
	if code, body := httpGet(t, m[1]+"healthz"); code != 200 {
		t.Errorf("GET %shealthz: %d %q", m[1], code, body)
	}
	master.Write([]byte{4}) // Ctrl-D
	<-scr.eof
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after Ctrl-D: %v\n%q", err, scr.String())
	}
}

// startOnTerminal runs the gateway's main (OPENTALON_E2E_MAIN) on a
// pseudo-terminal with no config file, HOME at home, the OpenAI-style
// provider at llmURL and server.listen at listen, and reads what the
// terminal shows; the process is killed when the test ends.
func startOnTerminal(t *testing.T, home, llmURL, listen string) (*exec.Cmd, *os.File, *screen) {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "OPENTALON_E2E_MAIN=1", "HOME="+home, "OPENAI_BASE_URL="+llmURL,
		"OPENTALON_DATA_DIR=", "OPENTALON_CONFIG=", "OPENTALON_LISTEN="+listen, "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	scr := &screen{eof: make(chan struct{})}
	go scr.read(master)
	return cmd, master, scr
}

// inbox is a core.Sink that hands each accepted message to a channel.
type inbox chan core.Inbound

func (b inbox) Accept(_ context.Context, in core.Inbound) error {
	b <- in
	return nil
}
func (b inbox) Edit(context.Context, core.Inbound) (bool, error) { return false, nil }
func (b inbox) React(context.Context, core.Reaction) error       { return nil }
func (b inbox) Commands() []core.CommandInfo                     { return nil }

// lockedBuffer is a bytes.Buffer written by one goroutine and read by
// another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With stdin on a terminal and stdout on a pipe (opentalon run | tee
// FILE; not interactive), the terminal still cuts a typed or pasted line
// at 4095 bytes: the console the gateway builds does not send what is
// left of it, and says so.
func TestConsoleWithStdinOnATerminalRefusesACutLine(t *testing.T) {
	master, slave := openPTY(t)
	go io.Copy(io.Discard, master) // the terminal's echo
	var out lockedBuffer
	a := &App{cfg: config.Default(), opts: AppOptions{Stdin: slave, Stdout: &out}, eof: make(chan struct{})}
	ch, err := buildConsole(a)
	if err != nil {
		t.Fatal(err)
	}
	got := make(inbox, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, got) }()
	if _, err := master.WriteString(strings.Repeat("x", 5000) + "\r" + "short\r"); err != nil {
		t.Fatal(err)
	}
	if in := <-got; in.Text != "short" {
		t.Errorf("the console sent %d bytes %.20q…, what the terminal left of a 5000-byte line; want it refused and then %q", len(in.Text), in.Text, "short")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "not sent: the terminal cuts a line at 4095 characters") {
		t.Errorf("no notice of the cut line; the console wrote %q", out.String())
	}
}

// The console the gateway builds escapes an answer for a terminal on
// stdout, whatever stdin is (echo question | opentalon run), and writes
// it as it is to a pipe (a script reading the answers, a file).
func TestConsoleEscapesAnswersForATerminalOnly(t *testing.T) {
	const answer = "a\x1b[2Jb"
	master, slave := openPTY(t)
	terminal := &App{cfg: config.Default(), opts: AppOptions{Stdin: strings.NewReader(""), Stdout: slave}, eof: make(chan struct{})}
	ch, err := buildConsole(terminal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Send(context.Background(), core.Outbound{}, answer); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(master).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := `a\x1b[2Jb` + "\r\n"; line != want {
		t.Errorf("on a terminal the console wrote %q; want %q", line, want)
	}

	var out bytes.Buffer
	piped := &App{cfg: config.Default(), opts: AppOptions{Stdin: strings.NewReader(""), Stdout: &out}, eof: make(chan struct{})}
	if ch, err = buildConsole(piped); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Send(context.Background(), core.Outbound{}, answer); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != answer+"\n" {
		t.Errorf("through a pipe the console wrote %q; want the answer as it is", got)
	}
}
