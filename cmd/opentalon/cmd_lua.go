package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/lua"
	"github.com/opentalon/opentalon/store"
)

const luaUsage = `usage: opentalon lua test SCRIPT --message TEXT [--metadata k=v]... [--hook filter|pre_hook|post_hook|on_schedule] [--llm-fake REPLY]... [--channel NAME] [--user ID]`

// listFlag is a flag that may be given several times.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// luaTestOutput is what `opentalon lua test` prints.
type luaTestOutput struct {
	Script string `json:"script"`
	Hook   string `json:"hook"`
	// Drop and Reason are the verdict (a filter's, or a pre_hook's).
	Drop   bool   `json:"drop"`
	Reason string `json:"reason,omitempty"`
	// Reply is on_schedule's text to post instead of asking the LLM.
	Reply string `json:"reply,omitempty"`
	// Ctx is the ctx the hook left (for a filter, the one it was given).
	Ctx      *luaTestCtx       `json:"ctx,omitempty"`
	LLMCalls []luaTestLLMCall  `json:"llm_calls"`
	KV       map[string]string `json:"kv,omitempty"`
	Error    string            `json:"error,omitempty"`
}

type luaTestCtx struct {
	Message   string            `json:"message"`
	Metadata  map[string]string `json:"metadata"`
	SessionID int64             `json:"session_id"`
	Channel   string            `json:"channel"`
	User      string            `json:"user"`
}

type luaTestLLMCall struct {
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
	Reply  string `json:"reply,omitempty"`
	Error  string `json:"error,omitempty"`
}

// cmdLua runs `opentalon lua test`: one hook of one script with a sample
// ctx, printing the result as JSON. ctx.llm uses the configured providers,
// or --llm-fake's replies (one per call, the last one repeating);
// ctx.kv_* use a store in memory, so a trial never writes the gateway's
// database.
func cmdLua(ctx context.Context, g *globalFlags, args []string, io Stdio, env config.Env, log *slog.Logger) error {
	if len(args) == 0 || args[0] != "test" {
		return subUsageError("lua", args, "test", luaUsage)
	}
	var message, hook, channel, user string
	var meta, fakes listFlag
	rest, err := parseSub("lua test", g, args[1:], io, func(fs *flag.FlagSet) {
		fs.StringVar(&message, "message", "", "the message (or, for post_hook, the answer) the hook sees")
		fs.Var(&meta, "metadata", "ctx.metadata entry k=v (repeatable)")
		fs.StringVar(&hook, "hook", "", "the hook to run: filter, pre_hook, post_hook or on_schedule (default: the first the script defines)")
		fs.Var(&fakes, "llm-fake", "reply of ctx.llm instead of the configured providers (repeatable: one per call)")
		fs.StringVar(&channel, "channel", "console", "ctx.channel")
		fs.StringVar(&user, "user", "local", "ctx.user")
	})
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return argCountError("lua test", rest, 1, "SCRIPT", luaUsage)
	}
	// An on_schedule run may be given --message "": the prompt of a
	// schedule that runs a plugin (docs/hooks.md, on_schedule).
	messageSet := false
	for _, a := range args[1:] {
		if a == "--message" || a == "-message" || strings.HasPrefix(a, "--message=") || strings.HasPrefix(a, "-message=") {
			messageSet = true
		}
	}
	if message == "" && (hook != lua.HookSchedule || !messageSet) {
		return usageError{"lua test: --message is required; " + luaUsage}
	}
	md := map[string]string{}
	for _, kv := range meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageError{fmt.Sprintf("lua test: --metadata %q: write it as key=value", kv)}
		}
		md[k] = v
	}
	switch hook {
	case "", lua.HookFilter, lua.HookPre, lua.HookPost, lua.HookSchedule:
	default:
		return usageError{fmt.Sprintf("lua test: --hook %q: use filter, pre_hook, post_hook or on_schedule", hook)}
	}

	// The script's limits; a script that makes no ctx.llm call needs
	// nothing else of the config (no provider).
	cfg, err := loadConfigFor(g, env, "plugins.lua")
	if err != nil {
		return err
	}
	var gen core.Generator
	if len(fakes) > 0 {
		gen = &fakeReplies{replies: fakes}
	} else {
		lazy := &lazyRouter{build: func() (core.Generator, func(), error) {
			cfg, _, err := loadConfig(g, env)
			if err != nil {
				return nil, nil, fmt.Errorf("ctx.llm needs a configured provider (or --llm-fake REPLY): %w", err)
			}
			db, err := openStore(ctx, cfg, store.Options{Logger: log})
			if err != nil {
				return nil, nil, err
			}
			r, err := buildRouter(cfg, db, nil, log, nil)
			if err != nil {
				db.Close()
				return nil, nil, err
			}
			return r, func() { db.Close() }, nil
		}}
		defer lazy.close()
		gen = lazy
	}
	rec := &recordingGenerator{next: gen}
	kv := lua.NewMemKV()
	o := luaOptions(cfg.Plugins.Lua, rec, kv, log)
	o.Dir, o.Watch, o.Files = "", false, []string{rest[0]}
	eng := lua.New(o)
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Close()
	s := eng.Scripts()[0]
	if hook == "" {
		if len(s.Hooks) == 0 {
			return fmt.Errorf("%s defines none of filter, pre_hook, post_hook, on_schedule", rest[0])
		}
		hook = s.Hooks[0]
	}
	in := core.HookInput{
		In:       core.Inbound{Conversation: core.ConversationKey{Channel: channel, Chat: "lua-test"}, UserID: user, Text: message},
		Session:  core.Session{ID: 1},
		Text:     message,
		Metadata: md,
	}
	out := luaTestOutput{Script: filepath.Base(rest[0]), Hook: hook}
	res, runErr := eng.RunHook(ctx, s.File, hook, in, message)
	if runErr != nil {
		out.Error = runErr.Error()
	} else {
		out.Drop, out.Reason, out.Reply = res.Drop, res.Reason, res.Reply
		c := &luaTestCtx{Message: message, Metadata: md, SessionID: 1, Channel: channel, User: user}
		if hook != lua.HookFilter && !res.Drop {
			c.Message, c.Metadata = res.Message, res.Metadata
		}
		out.Ctx = c
	}
	out.LLMCalls = rec.calls()
	if snap := kv.Snapshot(s.Name); len(snap) > 0 {
		out.KV = snap
	}
	// The message, the replies and the script's own text go to a terminal:
	// what encoding/json leaves as it is and a terminal acts on is escaped.
	if err := writeTermJSON(io.Out, out); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("lua test: %s %s failed: %w", out.Script, hook, runErr)
	}
	return nil
}

// fakeReplies answers the n-th call with the n-th reply, the last one
// repeating.
type fakeReplies struct {
	mu      sync.Mutex
	replies []string
	n       int
}

func (f *fakeReplies) Generate(_ context.Context, r core.GenerateRequest) (core.Generated, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := f.replies[min(f.n, len(f.replies)-1)]
	f.n++
	return core.Generated{Text: reply, Model: "fake"}, nil
}

// lazyRouter builds the router (and opens the database it needs) on the
// first ctx.llm call only.
type lazyRouter struct {
	build func() (core.Generator, func(), error)
	once  sync.Once
	gen   core.Generator
	done  func()
	err   error
}

func (l *lazyRouter) Generate(ctx context.Context, r core.GenerateRequest) (core.Generated, error) {
	l.once.Do(func() { l.gen, l.done, l.err = l.build() })
	if l.err != nil {
		return core.Generated{}, l.err
	}
	return l.gen.Generate(ctx, r)
}

func (l *lazyRouter) close() {
	if l.done != nil {
		l.done()
	}
}

// recordingGenerator records the calls it passes on.
type recordingGenerator struct {
	next core.Generator
	mu   sync.Mutex
	log  []luaTestLLMCall
}

func (r *recordingGenerator) Generate(ctx context.Context, req core.GenerateRequest) (core.Generated, error) {
	g, err := r.next.Generate(ctx, req)
	c := luaTestLLMCall{Model: req.Model, Prompt: req.Messages[len(req.Messages)-1].Content, Reply: g.Text}
	if err != nil {
		c.Error = err.Error()
	}
	r.mu.Lock()
	r.log = append(r.log, c)
	r.mu.Unlock()
	return g, err
}

func (r *recordingGenerator) calls() []luaTestLLMCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]luaTestLLMCall{}, r.log...)
}
