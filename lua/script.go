package lua

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// opConcat is gopher-lua's CONCAT opcode (R(A) := R(B) .. ... .. R(C)).
const opConcat = glua.OP_CONCAT

// script is one loaded version of one .lua file: compiled once, run on
// pooled states.
type script struct {
	// name is the file name without ".lua": the KV namespace.
	name string
	file string
	path string
	// mod and size identify the version on disk.
	mod   time.Time
	size  int64
	sum   [sha256.Size]byte
	proto *glua.FunctionProto
	hooks map[string]bool
	// unsafe: the script set stream_safe = false: its post_hook must see
	// an answer before the user sees any of it.
	unsafe bool
	// closed is the script's fail_closed: nil when it sets none.
	closed *bool

	pool     chan *vm
	failures atomic.Int32
	lastErr  atomic.Pointer[string]
}

// failClosed says whether a failed run of hook stops what it checks (the
// message, or the answer): as the script's fail_closed says, else for a
// guard — a filter, or a post_hook that must see the answer before the
// user does (stream_safe = false, a redaction) — but not for what only
// enriches or rewrites. on_schedule never does.
func (s *script) failClosed(hook string) bool {
	switch {
	case hook == HookSchedule || !s.has(hook):
		return false
	case s.closed != nil:
		return *s.closed
	}
	return hook == HookFilter || hook == HookPost && s.unsafe
}

func (s *script) has(hook string) bool { return s.hooks[hook] }

func (s *script) hookList() []string {
	var out []string
	for _, h := range []string{HookFilter, HookPre, HookPost, HookSchedule} {
		if s.hooks[h] {
			out = append(out, h)
		}
	}
	return out
}

// get takes an idle state or makes one.
func (s *script) get(e *Engine) *vm {
	select {
	case v := <-s.pool:
		return v
	default:
		return e.newVM()
	}
}

// put returns a state to the pool, or closes it when the pool is full.
func (s *script) put(v *vm) {
	select {
	case s.pool <- v:
	default:
		v.close()
	}
}

// drain closes the idle states.
func (s *script) drain() {
	for {
		select {
		case v := <-s.pool:
			v.close()
		default:
			return
		}
	}
}

// luaFile is one *.lua file found on disk.
type luaFile struct {
	path string
	mod  time.Time
	size int64
}

// listFiles returns the scripts to load, sorted by file name.
func (e *Engine) listFiles() ([]luaFile, error) {
	var paths []string
	if len(e.o.Files) > 0 {
		paths = e.o.Files
	} else {
		entries, err := os.ReadDir(e.o.Dir)
		if err != nil {
			return nil, fmt.Errorf("plugins.lua.scripts_dir %s: %w (create the directory, or set scripts_dir to \"\" to run no Lua hooks)", e.o.Dir, err)
		}
		for _, d := range entries {
			n := d.Name()
			if d.IsDir() || !strings.HasSuffix(n, ".lua") || strings.HasPrefix(n, ".") {
				continue
			}
			paths = append(paths, filepath.Join(e.o.Dir, n))
		}
	}
	var out []luaFile
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			if len(e.o.Files) == 0 && errors.Is(err, os.ErrNotExist) {
				continue // removed since the listing
			}
			return nil, fmt.Errorf("lua script %s: %w", p, err)
		}
		out = append(out, luaFile{path: p, mod: fi.ModTime(), size: fi.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return filepath.Base(out[i].path) < filepath.Base(out[j].path) })
	return out, nil
}

// loadAll loads every script; any that fails to compile fails the load.
func (e *Engine) loadAll(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	files, err := e.listFiles()
	if err != nil {
		return err
	}
	var loaded []*script
	var errs []error
	for _, f := range files {
		src, err := os.ReadFile(f.path)
		if err != nil {
			errs = append(errs, fmt.Errorf("lua script %s: %w", f.path, err))
			continue
		}
		s, err := e.compile(ctx, f, src)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		loaded = append(loaded, s)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	e.scripts.Store(&loaded)
	for _, s := range loaded {
		e.log.Info("lua script loaded", "script", s.file, "hooks", s.hookList())
	}
	return nil
}

// fileVersion is what tells one version of a script file from another.
type fileVersion struct {
	mod  int64 // modification time, Unix nanoseconds
	size int64
	sum  [sha256.Size]byte
}

// reloadFailure is a version of a file that failed to compile, and why.
type reloadFailure struct {
	ver fileVersion
	err string
}

// reportBroken tells the operator (Events) that a version of a script
// file does not compile; prev is the version that keeps running (nil:
// none does). errText is the compile error, cleaned and cut (cutText): a
// syntax error quotes its token, which may be a long string of the file.
//
// The event's Once key is the file and its content: each broken version
// reaches the sinks although a failed run or an earlier edit of the same
// script was just told (the sinks hold back an event of the same kind and
// subject for a while), and replicas reading the same files tell it once.
func (e *Engine) reportBroken(f luaFile, sum [sha256.Size]byte, errText string, prev *script) {
	file := filepath.Base(f.path)
	msg := fmt.Sprintf("lua script %s not loaded: %s; fix the file (it loads once it compiles)", file, errText)
	if prev != nil {
		e.log.Error("lua script not reloaded; its previous version keeps running", "script", file, "err", errText)
		msg = fmt.Sprintf("lua script %s not reloaded: %s; the last good version keeps running until the file is fixed", file, errText)
	} else {
		e.log.Error("lua script not loaded", "script", file, "err", errText)
	}
	if e.o.Events != nil {
		e.o.Events.Emit(core.OpsEvent{Kind: core.EventLuaHookFailed, Subject: file, At: time.Now(), Message: msg,
			Once:    fmt.Sprintf("lua_reload|%s|%x", file, sum[:6]),
			Details: map[string]string{"script": file, "hook": "reload", "previous_version_running": strconv.FormatBool(prev != nil)}})
	}
}

// reload brings the scripts in line with the directory: new and changed
// files are compiled (a file that fails keeps its previous version, and
// the error is logged with its line), removed files are dropped.
func (e *Engine) reload(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	files, err := e.listFiles()
	if err != nil {
		e.log.Error("lua scripts not reloaded", "err", err)
		return
	}
	old := map[string]*script{}
	for _, s := range e.current() {
		old[s.path] = s
	}
	var next []*script
	changed := false
	for _, f := range files {
		prev := old[f.path]
		delete(old, f.path)
		src, err := os.ReadFile(f.path)
		if err != nil {
			e.log.Warn("lua script not read", "script", filepath.Base(f.path), "err", err)
			if prev != nil {
				next = append(next, prev)
			}
			continue
		}
		// Modification time, size or content: any change reloads.
		if prev != nil && prev.mod.Equal(f.mod) && prev.size == f.size && prev.sum == sha256.Sum256(src) {
			// The running version is the one on disk (again: a broken
			// edit undone), whatever failed before.
			delete(e.failed, f.path)
			next = append(next, prev)
			continue
		}
		ver := fileVersion{mod: f.mod.UnixNano(), size: f.size, sum: sha256.Sum256(src)}
		if e.failed[f.path].ver == ver {
			// Already reported; it keeps failing until it changes.
			if prev != nil {
				next = append(next, prev)
			}
			continue
		}
		s, err := e.compile(ctx, f, src)
		if err != nil {
			if e.failed == nil {
				e.failed = map[string]reloadFailure{}
			}
			// The error goes to the sinks and the status page: cut, as
			// a run's (a syntax error quotes its token).
			errText := cutText(core.CleanText(err.Error()))
			e.failed[f.path] = reloadFailure{ver: ver, err: errText}
			e.reportBroken(f, ver.sum, errText, prev)
			if prev != nil {
				next = append(next, prev)
			}
			continue
		}
		delete(e.failed, f.path)
		changed = true
		if prev != nil {
			e.log.Info("lua script reloaded", "script", s.file, "hooks", s.hookList())
			defer prev.drain()
		} else {
			e.log.Info("lua script loaded", "script", s.file, "hooks", s.hookList())
		}
		next = append(next, s)
	}
	for path := range e.failed {
		if !listed(files, path) {
			delete(e.failed, path)
		}
	}
	for _, s := range old {
		changed = true
		e.log.Info("lua script removed", "script", s.file)
		defer s.drain()
	}
	if changed {
		e.scripts.Store(&next)
	}
	// After the scripts: a cleared error is never seen beside the
	// version it was about.
	broken := maps.Clone(e.failed)
	e.broken.Store(&broken)
}

// listed reports whether path is one of files.
func listed(files []luaFile, path string) bool {
	for _, f := range files {
		if f.path == path {
			return true
		}
	}
	return false
}

// compile parses one file's source, rewrites its concatenations into the
// bounded one (concat.go), compiles it and runs its top level once on a fresh state to learn which hooks it
// defines (that state becomes the first of its pool).
func (e *Engine) compile(ctx context.Context, f luaFile, src []byte) (*script, error) {
	file := filepath.Base(f.path)
	chunk, err := parse.Parse(bytes.NewReader(sourceText(src)), file)
	if err != nil {
		var pe *parse.Error
		if errors.As(err, &pe) {
			if pe.Pos.Line == parse.EOF {
				return nil, fmt.Errorf("%s: at end of file: %s", f.path, pe.Message)
			}
			return nil, fmt.Errorf("%s:%d:%d: %s near '%s'", f.path, pe.Pos.Line, pe.Pos.Column, pe.Message, pe.Token)
		}
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	rewritten, tails := rewriteConcat(chunk)
	proto, err := glua.Compile(rewritten, file)
	if err != nil {
		var ce *glua.CompileError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("%s:%d: %s", f.path, ce.Line, ce.Message)
		}
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	if err := checkConcat(proto, f.path); err != nil {
		return nil, err
	}
	if n := countOp(proto, glua.OP_TAILCALL); n != tails {
		return nil, fmt.Errorf("%s: %d tail calls escaped their check (a bug of OpenTalon's Lua sandbox; please report it)", f.path, n-tails)
	}
	s := &script{
		name: strings.TrimSuffix(file, ".lua"), file: file, path: f.path,
		mod: f.mod, size: f.size, sum: sha256.Sum256(src), proto: proto,
		hooks: map[string]bool{}, pool: make(chan *vm, e.o.PoolSize),
	}
	// The top level runs with the execution limit; only print is of use
	// there (ctx exists inside hooks only).
	v := e.newVM()
	hooks, err := e.probe(ctx, v, s)
	if err != nil {
		v.close()
		msg := luaMessage(err)
		if rest, ok := strings.CutPrefix(msg, file+":"); ok {
			// "top.lua:3: x" names the file by its chunk name: the
			// path replaces it rather than preceding it.
			return nil, fmt.Errorf("%s:%s", f.path, rest)
		}
		return nil, fmt.Errorf("%s: %s", f.path, msg)
	}
	s.hooks = hooks
	if len(hooks) == 0 {
		e.log.Warn("lua script defines none of filter, pre_hook, post_hook, on_schedule; it does nothing", "script", file)
	}
	s.put(v)
	return s, nil
}

// probe runs s's top level on v and reports which hooks it defines.
func (e *Engine) probe(ctx context.Context, v *vm, s *script) (map[string]bool, error) {
	r := &run{e: e, s: s, hook: "load"}
	err := e.limited(ctx, v, r, func() error {
		env, err := v.runChunk(s)
		if err != nil {
			return err
		}
		hooks := map[string]bool{}
		for _, h := range []string{HookFilter, HookPre, HookPost, HookSchedule} {
			if _, ok := env.RawGetString(h).(*glua.LFunction); ok {
				hooks[h] = true
			}
		}
		s.hooks = hooks
		s.unsafe = env.RawGetString("stream_safe") == glua.LFalse
		switch env.RawGetString("fail_closed") {
		case glua.LTrue:
			s.closed = new(bool)
			*s.closed = true
		case glua.LFalse:
			s.closed = new(bool)
		}
		return nil
	})
	return s.hooks, err
}

// checkConcat makes sure no concatenation instruction is left after the
// rewrite: one would build a string no limit sees.
func checkConcat(p *glua.FunctionProto, path string) error {
	for pc, inst := range p.Code {
		if int(inst>>26) != opConcat {
			continue
		}
		line := 0
		if pc < len(p.DbgSourcePositions) {
			line = p.DbgSourcePositions[pc]
		}
		return fmt.Errorf("%s:%d: a concatenation escaped the bounded one (a bug of OpenTalon's Lua sandbox; please report it)", path, line)
	}
	for _, sub := range p.FunctionPrototypes {
		if err := checkConcat(sub, path); err != nil {
			return err
		}
	}
	return nil
}

// sourceText is a file's Lua source: without the byte order mark an
// editor may save UTF-8 with, and with a first line starting with '#' (a
// "#!/usr/bin/env lua" line) emptied, as the lua command skips it. Line
// numbers stay those of the file.
func sourceText(src []byte) []byte {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if len(src) > 0 && src[0] == '#' {
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			return src[i:]
		}
		return nil
	}
	return src
}

// countOp counts the instructions of opcode op in p and its functions.
func countOp(p *glua.FunctionProto, op int) int {
	n := 0
	for _, inst := range p.Code {
		if int(inst>>26) == op {
			n++
		}
	}
	for _, sub := range p.FunctionPrototypes {
		n += countOp(sub, op)
	}
	return n
}

// luaMessage is a run's error without gopher-lua's stack traceback, cut
// to maxLogMsg bytes: a script may raise megabytes (error(string.rep(…))),
// and the message goes to the log, the operator's notification sinks and
// the status page, once per failed run, and into the reason a message
// stopped by a failing guard is stored with (valid UTF-8 without NUL
// bytes, which PostgreSQL's TEXT refuses).
func luaMessage(err error) string { return cutText(core.CleanText(errorText(err))) }

// cutText cuts msg to maxLogMsg bytes at a rune boundary, saying how
// many bytes it left out.
func cutText(msg string) string {
	if len(msg) <= maxLogMsg {
		return msg
	}
	cut := maxLogMsg
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes more)", msg[:cut], len(msg)-cut)
}

// errorText is a run's error as text. An error value that is not a
// message (error({code = 1}), error(nil)), or a library function's panic,
// has no position of its own: it gets the innermost script line of the
// traceback.
func errorText(err error) string {
	var ae *glua.ApiError
	if !errors.As(err, &ae) || ae.Object == nil {
		return err.Error()
	}
	var msg string
	switch ae.Object.(type) {
	case glua.LString, glua.LNumber:
		if ae.Type != glua.ApiErrorPanic {
			return ae.Object.String()
		}
		// A library function panicked (math.random(0)): the message
		// is Go's, without a position.
		msg = "a library function failed: " + ae.Object.String()
	default:
		msg = fmt.Sprintf("error() was given a %s, not a message (%s)", ae.Object.Type(), ae.Object.String())
	}
	for _, line := range strings.Split(ae.StackTrace, "\n") {
		where, _, ok := strings.Cut(strings.TrimSpace(line), " in ")
		if ok && strings.HasSuffix(where, ":") && !strings.HasPrefix(where, "[G]") {
			return where + " " + msg
		}
	}
	return msg
}
