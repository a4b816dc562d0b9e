package lua

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Hook names a script may define.
const (
	HookFilter = "filter"
	HookPre    = "pre_hook"
	HookPost   = "post_hook"
	// HookSchedule runs at every firing of a schedule (OnSchedule).
	HookSchedule = "on_schedule"
)

// maxFailures consecutive failed runs make a script unhealthy on the
// status page (it keeps running: one user's messages must not switch a
// script off for everyone).
const maxFailures = 3

// What the user gets when a script that fails closed could not check
// their message, or the answer.
const (
	checkFailedNotice  = "Sorry, I could not check your message just now, so I did not answer it. Please try again in a moment."
	answerFailedNotice = "Sorry, I could not check my answer before sending it, so I did not send it. Please try again in a moment."
)

// ErrTimeout and ErrMemory are the causes of a run stopped by a limit;
// a run's error wraps one of them.
var (
	ErrTimeout = errors.New("lua: execution time limit")
	ErrMemory  = errors.New("lua: memory limit")
)

// Options configure an Engine (plugins.lua in the config).
type Options struct {
	// Dir holds the *.lua scripts (plugins.lua.scripts_dir).
	Dir string
	// Files, when set, are the scripts instead of Dir's (opentalon lua
	// test); they are not watched.
	Files []string
	// Watch reloads scripts when Dir changes (plugins.lua.watch).
	Watch bool
	// DefaultModel is ctx.llm's model when a script names none.
	DefaultModel string
	// DropNotice, when set, is sent to the user whose message a filter
	// dropped (plugins.lua.drop_notice).
	DropNotice string
	// MemoryMB is the heap a run may add (default 64).
	MemoryMB int
	// Timeout bounds a run's execution, time spent waiting for ctx.llm
	// excluded (default 5s).
	Timeout time.Duration
	// LLMTimeout bounds one ctx.llm call (default 10s).
	LLMTimeout time.Duration
	// LLMMaxCalls is how many ctx.llm calls one hook run may make
	// (0 = none).
	LLMMaxCalls int
	// Generator answers ctx.llm (nil: ctx.llm fails).
	Generator core.Generator
	// KV keeps ctx.kv_get/kv_set (nil: they fail).
	KV KV
	// KVQuota bounds each script's KV namespace
	// (plugins.lua.limits.kv_max_keys and kv_max_bytes; 0 = no bound).
	KVQuota core.PluginStateQuota
	// PoolSize is how many idle states are kept per script (default 8).
	PoolSize int
	// HeapPoll is how often the heap watchdog looks while a script runs
	// (default 1ms).
	HeapPoll time.Duration
	Logger   *slog.Logger
	// Events is told when a hook run fails, and when an edited script
	// does not reload (once per version of the file; nil = nobody).
	Events core.OpsEvents
	// Observer counts the failed runs of filters, pre_hooks and
	// post_hooks as HookFailed of their stage (opentalon_hook_failures_total;
	// nil = nobody). A failed run is the script's own: it returns no
	// error to the hook chain, which counts only the errors it sees.
	Observer core.Observer
}

// Engine runs the Lua hooks: it implements core.Hooks. Lifecycle: New
// (no side effects), Start (loads the scripts, starts watching), Close.
// Safe for concurrent use.
type Engine struct {
	o       Options
	log     *slog.Logger
	dog     *watchdog
	scripts atomic.Pointer[[]*script]
	// steps caches the hook steps of the current scripts.
	steps atomic.Pointer[stepCache]
	// states counts the Lua states made (a pooled run makes none).
	states atomic.Int64

	// mu serializes loads and reloads.
	mu sync.Mutex
	// failed holds, by path, the version of each file whose last compile
	// failed and its error, so a reload for another reason does not log
	// and report it again; under mu.
	failed map[string]reloadFailure
	// broken is a copy of failed for Scripts, replaced after each reload.
	broken  atomic.Pointer[map[string]reloadFailure]
	stop    context.CancelFunc
	stopped chan struct{}
}

var _ core.Hooks = (*Engine)(nil)

// New builds an Engine; it starts nothing.
func New(o Options) *Engine {
	if o.MemoryMB <= 0 {
		o.MemoryMB = 64
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.LLMTimeout <= 0 {
		o.LLMTimeout = 10 * time.Second
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 8
	}
	if o.HeapPoll <= 0 {
		o.HeapPoll = time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{o: o, log: o.Logger.With("component", "lua")}
	e.dog = newWatchdog(uint64(o.MemoryMB)<<20, o.HeapPoll)
	e.scripts.Store(&[]*script{})
	return e
}

// Start loads every script; a script that does not compile fails the
// start with its file and line. With Watch it then follows Dir's changes
// until Close.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.loadAll(ctx); err != nil {
		return err
	}
	if e.o.Watch && e.o.Dir != "" && len(e.o.Files) == 0 {
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		e.stop = cancel
		e.stopped = make(chan struct{})
		ready := make(chan error, 1)
		go func() {
			defer close(e.stopped)
			e.watch(wctx, ready)
		}()
		if err := <-ready; err != nil {
			cancel()
			<-e.stopped
			e.stop = nil
			return err
		}
	}
	return nil
}

// Close stops watching and releases the idle states.
func (e *Engine) Close() error {
	if e.stop != nil {
		e.stop()
		<-e.stopped
		e.stop = nil
	}
	for _, s := range *e.scripts.Load() {
		s.drain()
	}
	return nil
}

// Script describes one loaded script.
type Script struct {
	// Name is the file name without ".lua": the script's KV namespace.
	Name string
	File string
	// Hooks are the hooks it defines, in the order they run.
	Hooks []string
	// FailClosed says a failed run of one of its hooks stops the message
	// or the answer (its filter, a redacting post_hook, or any hook with
	// fail_closed = true).
	FailClosed bool
	// Failures counts its runs that failed in a row; LastError is the
	// last one's error.
	Failures  int
	LastError string
	// Loaded says a version of the file runs: false for a file whose
	// every version so far failed to compile (see ReloadError).
	Loaded bool
	// Version is the running version's content (the first 12 hex digits
	// of its SHA-256) and Modified its file's modification time; empty
	// and zero when not Loaded.
	Version  string
	Modified time.Time
	// ReloadError, when set, is why the file on disk now does not load
	// (its file:line); the version above keeps running. It clears when
	// a good version loads.
	ReloadError string
}

// Scripts lists the loaded scripts in the order they run, then, in
// file-name order, the files on disk that failed to load with no
// version of them running (Loaded false).
func (e *Engine) Scripts() []Script {
	var out []Script
	broken := map[string]reloadFailure{}
	if b := e.broken.Load(); b != nil {
		broken = *b
	}
	loaded := map[string]bool{}
	for _, s := range e.current() {
		loaded[s.path] = true
		sc := Script{Name: s.name, File: s.file, Hooks: s.hookList(), Failures: int(s.failures.Load()),
			Loaded: true, Version: hex.EncodeToString(s.sum[:6]), Modified: s.mod, ReloadError: broken[s.path].err}
		for _, h := range sc.Hooks {
			sc.FailClosed = sc.FailClosed || s.failClosed(h)
		}
		if e := s.lastErr.Load(); e != nil && sc.Failures > 0 {
			sc.LastError = *e
		}
		out = append(out, sc)
	}
	for _, path := range slices.Sorted(maps.Keys(broken)) {
		if !loaded[path] {
			file := filepath.Base(path)
			out = append(out, Script{Name: strings.TrimSuffix(file, ".lua"), File: file, ReloadError: broken[path].err})
		}
	}
	return out
}

func (e *Engine) current() []*script { return *e.scripts.Load() }

// Pre runs, script by script in file-name order, each script's filter
// and then its pre_hook. A filter's drop ends the turn (with
// DropNotice as the reply when set); a pre_hook's message and metadata go
// on to the next script and then to the agent. A failed run leaves the
// message as it was, or, for a script that fails closed, stops it.
func (e *Engine) Pre(ctx context.Context, in core.HookInput) (core.PreResult, error) {
	res := core.PreResult{Text: in.Text, Metadata: cloneMeta(in.Metadata)}
	for _, s := range e.current() {
		var err error
		if res, err = e.preScript(ctx, s, in, res); err != nil || res.Drop {
			return res, err
		}
		in.Text, in.Metadata = res.Text, res.Metadata
	}
	return res, nil
}

// preScript runs one script's filter and then its pre_hook on res.
func (e *Engine) preScript(ctx context.Context, s *script, in core.HookInput, res core.PreResult) (core.PreResult, error) {
	for _, hook := range []string{HookFilter, HookPre} {
		if !s.has(hook) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		out, err := e.runHook(ctx, s, hook, in, res.Text, res.Metadata)
		if err != nil {
			if ctx.Err() == nil && s.failClosed(hook) {
				e.log.Warn("message stopped: a lua hook that fails closed failed", "script", s.file, "hook", hook, "conv", in.In.Conversation.String())
				res.Drop, res.Reason, res.Reply = true, fmt.Sprintf("%s %s failed (it fails closed): %v", s.file, hook, err), checkFailedNotice
				return res, nil
			}
			continue
		}
		if out.drop {
			e.log.Info("message dropped by a lua hook", "script", s.file, "hook", hook, "reason", out.reason, "conv", in.In.Conversation.String())
			res.Drop, res.Reason, res.Reply = true, out.reason, e.o.DropNotice
			return res, nil
		}
		if hook == HookPre {
			res.Text, res.Metadata = out.message, out.metadata
		}
	}
	return res, nil
}

// Post runs every script's post_hook in file-name order on the answer;
// each sees the answer as the previous one left it.
func (e *Engine) Post(ctx context.Context, in core.HookInput, answer string) (string, error) {
	md := cloneMeta(in.Metadata)
	for _, s := range e.current() {
		if !s.has(HookPost) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return answer, err
		}
		out, next := e.postScript(ctx, s, in, answer, md)
		if next == answerFailedNotice && next != answer {
			return next, nil // withheld: no later hook rewrites the notice
		}
		answer = next
		if out.metadata != nil {
			md = out.metadata
		}
	}
	return answer, nil
}

// postScript runs one script's post_hook on answer and returns the answer
// it leaves: its own on success, the same on a failure, or, for a script
// that fails closed, a notice instead of the answer it could not check.
func (e *Engine) postScript(ctx context.Context, s *script, in core.HookInput, answer string, md map[string]string) (outcome, string) {
	out, err := e.runHook(ctx, s, HookPost, in, answer, md)
	switch {
	case err == nil:
		return out, out.message
	case ctx.Err() == nil && s.failClosed(HookPost):
		e.log.Warn("answer withheld: a lua post_hook that fails closed failed", "script", s.file, "conv", in.In.Conversation.String())
		return outcome{}, answerFailedNotice
	}
	return outcome{}, answer
}

var _ core.StreamSafety = (*Engine)(nil)

// StreamSafe implements core.StreamSafety: answers are not streamed
// while a script with a post_hook sets stream_safe = false (a redaction
// hook must see the answer before the user does).
func (e *Engine) StreamSafe(core.HookInput) bool {
	for _, s := range e.current() {
		if s.unsafe && s.has(HookPost) {
			return false
		}
	}
	return true
}

// Result is what one hook run decided.
type Result struct {
	Message  string
	Metadata map[string]string
	Drop     bool
	Reason   string
	// Reply is on_schedule's text to post instead of asking the LLM.
	Reply string
}

// RunHook runs one hook of the script with that file name on text, as
// `opentalon lua test` does; the error is the run's failure.
func (e *Engine) RunHook(ctx context.Context, file, hook string, in core.HookInput, text string) (Result, error) {
	for _, s := range e.current() {
		if s.file != file && s.name != file {
			continue
		}
		if !s.has(hook) {
			return Result{}, fmt.Errorf("%s defines no %s (it defines %v)", s.file, hook, s.hookList())
		}
		out, err := e.invoke(ctx, s, hook, in, text, cloneMeta(in.Metadata))
		if err != nil {
			return Result{}, err
		}
		return Result{Message: out.message, Metadata: out.metadata, Drop: out.drop, Reason: out.reason, Reply: out.reply}, nil
	}
	return Result{}, fmt.Errorf("no script %s is loaded", file)
}

// runHook runs one hook; a failure is logged, counted and told to the
// operator (Events), and returned. A failure is the message's alone: the
// script runs again for the next one, whatever failed before.
func (e *Engine) runHook(ctx context.Context, s *script, hook string, in core.HookInput, text string, md map[string]string) (outcome, error) {
	out, err := e.invoke(ctx, s, hook, in, text, md)
	if err == nil {
		s.failures.Store(0)
		return out, nil
	}
	if ctx.Err() != nil {
		// The request itself ended (shutdown, its own timeout): not the
		// script's failure.
		e.log.Debug("lua hook interrupted", "script", s.file, "hook", hook, "err", err)
		return outcome{}, err
	}
	n := s.failures.Add(1)
	msg := err.Error()
	s.lastErr.Store(&msg)
	closed := s.failClosed(hook)
	effect := "the message goes on without its change"
	switch {
	case closed && hook == HookPost:
		effect = "the answer was withheld (the script fails closed)"
	case closed:
		effect = "the message was stopped (the script fails closed)"
	}
	e.log.Warn("lua hook failed; "+effect, "script", s.file, "hook", hook, "err", err, "consecutive_failures", n)
	if e.o.Observer != nil && hook != HookSchedule {
		stage := core.StagePreHooks
		if hook == HookPost {
			stage = core.StagePostHooks
		}
		e.o.Observer.HookFailed(in.In.Conversation.Channel, stage)
	}
	if e.o.Events != nil {
		e.o.Events.Emit(core.OpsEvent{Kind: core.EventLuaHookFailed, Subject: s.file, At: time.Now(),
			Message: fmt.Sprintf("lua script %s: %s failed (%s); %s", s.file, hook, err, effect),
			Details: map[string]string{"script": s.file, "hook": hook, "fail_closed": strconv.FormatBool(closed), "consecutive_failures": strconv.Itoa(int(n))}})
	}
	return outcome{}, err
}

func cloneMeta(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
