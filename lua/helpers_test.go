package lua

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// fakeLLM is a core.Generator that answers by a function of the prompt
// and records every request.
type fakeLLM struct {
	mu     sync.Mutex
	answer func(prompt string) string
	// fail, when set, fails the calls it returns an error for.
	fail  func(prompt string) error
	delay time.Duration
	reqs  []core.GenerateRequest
}

func (f *fakeLLM) Generate(ctx context.Context, r core.GenerateRequest) (core.Generated, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	answer, delay, fail := f.answer, f.delay, f.fail
	f.mu.Unlock()
	if fail != nil {
		if err := fail(r.Messages[len(r.Messages)-1].Content); err != nil {
			return core.Generated{}, err
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return core.Generated{}, ctx.Err()
		}
	}
	text := ""
	if answer != nil {
		text = answer(r.Messages[len(r.Messages)-1].Content)
	}
	return core.Generated{Text: text, Model: "fake/" + r.Model}, nil
}

func (f *fakeLLM) requests() []core.GenerateRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]core.GenerateRequest(nil), f.reqs...)
}

// syncBuf is a goroutine-safe log buffer.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testEngine is an Engine over a temp directory of scripts.
type testEngine struct {
	*Engine
	dir  string
	logs *syncBuf
	llm  *fakeLLM
	kv   *MemKV
}

// baseOptions are the config defaults with a fake LLM and a MemKV.
func baseOptions() Options {
	return Options{
		DefaultModel: "small",
		MemoryMB:     64,
		Timeout:      5 * time.Second,
		LLMTimeout:   10 * time.Second,
		LLMMaxCalls:  3,
	}
}

// startEngine writes scripts (file name → source) into a temp dir and
// starts an engine on it; tweak may change the options first.
func startEngine(t testing.TB, scripts map[string]string, tweak func(*Options)) *testEngine {
	t.Helper()
	dir := t.TempDir()
	for name, src := range scripts {
		writeScript(t, dir, name, src)
	}
	te := &testEngine{dir: dir, logs: &syncBuf{}, llm: &fakeLLM{}, kv: NewMemKV()}
	o := baseOptions()
	o.Dir, o.Generator, o.KV = dir, te.llm, te.kv
	o.Logger = slog.New(slog.NewTextHandler(te.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if tweak != nil {
		tweak(&o)
	}
	te.Engine = New(o)
	if err := te.Start(context.Background()); err != nil {
		t.Fatalf("start engine: %v", err)
	}
	t.Cleanup(func() { te.Close() })
	return te
}

func writeScript(t testing.TB, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// seed reads a script of seed 001 saved unchanged under testdata/seed.
func seed(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seed", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// input is a HookInput for text in a console conversation.
func input(text string) core.HookInput {
	return core.HookInput{
		In:      core.Inbound{Conversation: core.ConversationKey{Channel: "console", Chat: "local"}, UserID: "u1", Text: text},
		Session: core.Session{ID: 7},
		Text:    text,
	}
}

func (te *testEngine) pre(t testing.TB, text string) core.PreResult {
	t.Helper()
	res, err := te.Pre(context.Background(), input(text))
	if err != nil {
		t.Fatalf("Pre(%q): %v", text, err)
	}
	return res
}

func (te *testEngine) post(t testing.TB, in core.HookInput, answer string) string {
	t.Helper()
	out, err := te.Post(context.Background(), in, answer)
	if err != nil {
		t.Fatalf("Post(%q): %v", answer, err)
	}
	return out
}
