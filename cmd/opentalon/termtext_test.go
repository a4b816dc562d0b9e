package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// hostileText is what a chat user may put into a name or a message to
// act on an operator's terminal: clear the screen (ESC [ 2J), set the
// window's title (an OSC sequence ended by BEL), start a sequence with
// the C1 CSI (U+009B), reverse what follows (U+202E), and break a line.
const hostileText = "a\x1b[2Jb\x1b]0;pwned\x07c\u009bd\u202ee\nf"

// bidiOnly has no control character, only a bidirectional override:
// yaml.v3 writes it in a plain scalar as it is.
const bidiOnly = "x\u202ey"

// assertTermSafe fails when out holds a character a terminal would act
// on rather than show: a control character other than a line break
// (ESC, BEL, U+009B), a bidirectional override, or bytes not UTF-8.
func assertTermSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: output is not UTF-8:\n%q", what, out)
	}
	for _, r := range out {
		if r != '\n' && unsafeRune(r) {
			t.Errorf("%s: raw %U reaches the terminal:\n%q", what, r, out)
			return
		}
	}
}

func TestTermTextOfHostileText(t *testing.T) {
	t.Parallel()
	got := termText(hostileText)
	assertTermSafe(t, "termText", got)
	if want := `a\x1b[2Jb\x1b]0;pwned\x07c\u009bd\u202ee ⏎ f`; got != want {
		t.Fatalf("termText = %q, want %q", got, want)
	}
}

func TestMemoryCommandsTermSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	tags := []string{hostileText, bidiOnly}
	if _, err := db.SaveMemory(ctx, core.Memory{Owner: "telegram:42", Place: "telegram:-100" + hostileText, Content: "zebra " + hostileText, Tags: tags}); err != nil {
		t.Fatal(err)
	}
	// The store normalises tags (lower case, one a line): compare with
	// what it keeps.
	stored, err := db.Memories(ctx, core.MemoryQuery{Limit: 1})
	if err != nil || len(stored) != 1 {
		t.Fatal(stored, err)
	}
	tags = stored[0].Tags
	if !strings.ContainsRune(strings.Join(tags, ""), '\x1b') {
		t.Fatalf("stored tags %q lost the escape this test needs", tags)
	}
	for _, args := range [][]string{{"list"}, {"search", "zebra"}} {
		var out bytes.Buffer
		if err := runMemory(ctx, db, args, &out); err != nil {
			t.Fatalf("memory %v: %v", args, err)
		}
		assertTermSafe(t, "memory "+args[0], out.String())
		if !strings.Contains(out.String(), `zebra a\x1b[2Jb`) || !strings.Contains(out.String(), `\u202ee`) {
			t.Errorf("memory %v shows no escaped content:\n%q", args, out.String())
		}

		out.Reset()
		if err := runMemory(ctx, db, append(args, "--json"), &out); err != nil {
			t.Fatalf("memory %v --json: %v", args, err)
		}
		assertTermSafe(t, "memory "+args[0]+" --json", out.String())
		var ms []exportedMemory
		if err := json.Unmarshal(out.Bytes(), &ms); err != nil || len(ms) != 1 {
			t.Fatalf("memory %v --json: %v\n%q", args, err, out.String())
		}
		if ms[0].Content != "zebra "+hostileText || strings.Join(ms[0].Tags, "|") != strings.Join(tags, "|") {
			t.Errorf("memory %v --json read back %q %q; want the stored text", args, ms[0].Content, ms[0].Tags)
		}
	}
	// The export to stdout is safe too, and reads back as stored.
	for _, format := range []string{"json", "yaml"} {
		var out bytes.Buffer
		if err := runMemory(ctx, db, []string{"export", "--format", format}, &out); err != nil {
			t.Fatalf("memory export --format %s: %v", format, err)
		}
		assertTermSafe(t, "memory export --format "+format, out.String())
		var ms []exportedMemory
		if err := yaml.Unmarshal(out.Bytes(), &ms); err != nil || len(ms) != 1 { // JSON is YAML
			t.Fatalf("memory export --format %s: %v\n%q", format, err, out.String())
		}
		if ms[0].Content != "zebra "+hostileText || strings.Join(ms[0].Tags, "|") != strings.Join(tags, "|") || ms[0].Place != "telegram:-100"+hostileText {
			t.Errorf("memory export --format %s read back %q %q place %q; want the stored text", format, ms[0].Content, ms[0].Tags, ms[0].Place)
		}
	}
}

func TestUsageTermSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := db.AddUsage(ctx, core.UsageRecord{At: now.Add(-time.Hour), Conversation: "slack:" + hostileText, UserID: hostileText,
		Model: "p/a", InputTokens: 1, OutputTokens: 1, CostUSD: 0.5}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ by, key string }{{"user", hostileText}, {"chat", "slack:" + hostileText}} {
		var out bytes.Buffer
		if err := runUsage(ctx, db, now, []string{"--by", c.by}, &out); err != nil {
			t.Fatalf("usage --by %s: %v", c.by, err)
		}
		assertTermSafe(t, "usage --by "+c.by, out.String())
		if !strings.Contains(out.String(), `a\x1b[2Jb`) || !strings.Contains(out.String(), "0.5000") {
			t.Errorf("usage --by %s:\n%q", c.by, out.String())
		}

		out.Reset()
		if err := runUsage(ctx, db, now, []string{"--by", c.by, "--json"}, &out); err != nil {
			t.Fatalf("usage --by %s --json: %v", c.by, err)
		}
		assertTermSafe(t, "usage --by "+c.by+" --json", out.String())
		var res struct{ Rows []struct{ Key string } }
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Rows) != 1 || res.Rows[0].Key != c.key {
			t.Errorf("usage --by %s --json: %v %+v; want the key %q", c.by, err, res, c.key)
		}
	}
}

func TestPairTermSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	now := time.Now()
	if _, err := db.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "42" + hostileText, UserName: hostileText,
		Conversation: core.ConversationKey{Channel: "telegram", Chat: "42"}, Code: "ABCD1234", RequestedAt: now}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runPair(ctx, db, now, []string{"list"}, &out); err != nil {
		t.Fatal(err)
	}
	assertTermSafe(t, "pair list", out.String())
	if !strings.Contains(out.String(), "ABCD1234") || !strings.Contains(out.String(), `a\x1b[2Jb`) {
		t.Errorf("pair list:\n%q", out.String())
	}
	out.Reset()
	if err := runPair(ctx, db, now, []string{"approve", "ABCD1234"}, &out); err != nil {
		t.Fatal(err)
	}
	assertTermSafe(t, "pair approve", out.String())
	if !strings.HasPrefix(out.String(), "approved telegram user 42") {
		t.Errorf("pair approve: %q", out.String())
	}
}

func TestSessionExportTermSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}
	s, err := db.NewSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{hostileText, bidiOnly, "two\nlines"}
	var msgs []core.ChatMessage
	for _, text := range texts {
		msgs = append(msgs, core.ChatMessage{Role: core.RoleUser, Content: text, Name: "@" + text})
	}
	if err := db.AppendMessages(ctx, s.ID, msgs); err != nil {
		t.Fatal(err)
	}
	readBack := func(what string, b []byte) {
		t.Helper()
		var doc struct {
			Sessions []struct{ Messages []exportedMessages }
		}
		if err := yaml.Unmarshal(b, &doc); err != nil || len(doc.Sessions) != 1 || len(doc.Sessions[0].Messages) != len(texts) { // JSON is YAML
			t.Fatalf("%s: %v\n%q", what, err, b)
		}
		for i, m := range doc.Sessions[0].Messages {
			if m.Content != texts[i] || m.Name != "@"+texts[i] {
				t.Errorf("%s: message %d read back %q from %q, want %q from %q", what, i, m.Content, m.Name, texts[i], "@"+texts[i])
			}
		}
	}
	for _, format := range []string{"yaml", "json"} {
		var out bytes.Buffer
		if err := runSession(ctx, db, []string{"export", "--format", format, conv.String()}, &out); err != nil {
			t.Fatalf("session export --format %s: %v", format, err)
		}
		assertTermSafe(t, "session export --format "+format, out.String())
		readBack("session export --format "+format, out.Bytes())

		// A file keeps the text as it was (its encoding may escape it).
		file := filepath.Join(t.TempDir(), "s."+format)
		if err := runSession(ctx, db, []string{"export", "--format", format, "--out", file, conv.String()}, &out); err != nil {
			t.Fatalf("session export --out: %v", err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		readBack("session export --format "+format+" --out", b)
	}
}

func TestAffinityAndPluginsTermSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db.UpdateAffinity(ctx, "chat"+hostileText, "p/"+hostileText, func(a core.Affinity) core.Affinity {
		a.Pos, a.Positives, a.UpdatedAt, a.LastSignal = 1, 1, at, at
		return a
	})
	var out bytes.Buffer
	if err := runAffinity(ctx, db, 30, nil, at, []string{"show"}, &out); err != nil {
		t.Fatal(err)
	}
	assertTermSafe(t, "affinity show", out.String())
	if !strings.Contains(out.String(), `chata\x1b[2Jb`) {
		t.Errorf("affinity show:\n%q", out.String())
	}
	out.Reset()
	if err := runAffinity(ctx, db, 30, nil, at, []string{"show", "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	assertTermSafe(t, "affinity show --json", out.String())
	var rows []struct{ Task, Model string }
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].Task != "chat"+hostileText || rows[0].Model != "p/"+hostileText {
		t.Errorf("affinity show --json: %v %q", err, rows)
	}

	if _, err := db.PluginBind(ctx, "notes"+hostileText, "/opt/"+bidiOnly, "0123456789abcdef0123"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runPlugins(ctx, db, []string{"list"}, &out); err != nil {
		t.Fatal(err)
	}
	assertTermSafe(t, "plugins list", out.String())
	if !strings.Contains(out.String(), `notesa\x1b[2Jb`) || !strings.Contains(out.String(), `/opt/x\u202ey`) {
		t.Errorf("plugins list:\n%q", out.String())
	}
}

func TestLuaTestTermSafe(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "echo.lua")
	if err := os.WriteFile(p, []byte("function pre_hook(ctx)\n  ctx.message = ctx.message .. ctx.llm('x')\n  return ctx\nend\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runMain(t, map[string]string{"HOME": t.TempDir()}, "", "lua", "test", p, "--message", hostileText, "--llm-fake", bidiOnly)
	assertTermSafe(t, "lua test", r.stdout)
	var o luaTestOutput
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || r.code != 0 || o.Ctx == nil || o.Ctx.Message != hostileText+bidiOnly {
		t.Fatalf("lua test: exit %d, %v, %+v\n%q%q", r.code, err, o, r.stdout, r.stderr)
	}
}

// hostileLLM is a provider that refuses every request with hostileText
// as its error's message.
func hostileLLM(t *testing.T) *providertest.Server {
	t.Helper()
	llm := providertest.NewOpenAI(t)
	msg, err := json.Marshal(hostileText)
	if err != nil {
		t.Fatal(err)
	}
	llm.SetReply(func(providertest.Received) providertest.Script {
		return providertest.Script{Status: 400, Body: `{"error":{"message":` + string(msg) + `,"type":"invalid_request_error"}}`}
	})
	return llm
}

// doctor quotes what a provider answered in its line: an error whose
// text holds escape sequences stays on one line and is shown, not acted on.
func TestDoctorTermSafe(t *testing.T) {
	t.Parallel()
	llm := hostileLLM(t)
	path := writeConfig(t, doctorConfig(t.TempDir(), llm.BaseURL()))
	res := runMain(t, nil, "", "--config", path, "doctor")
	assertTermSafe(t, "doctor", res.stdout)
	if res.code != 1 || !strings.Contains(res.stdout, `a\x1b[2Jb`) {
		t.Fatalf("doctor: exit %d; want a FAIL quoting the provider's error, escaped\n%q%q", res.code, res.stdout, res.stderr)
	}
	assertCheckLines(t, res.stdout)
}

// A command's error may quote a provider's answer; it reaches stderr
// shown, not acted on.
func TestCommandErrorTermSafe(t *testing.T) {
	t.Parallel()
	llm := hostileLLM(t)
	path := writeConfig(t, doctorConfig(t.TempDir(), llm.BaseURL()))
	res := runMain(t, nil, "", "--config", path, "complete", "say hi")
	assertTermSafe(t, "complete's error", res.stderr)
	if res.code == 0 || !strings.Contains(res.stderr, `a\x1b[2Jb`) {
		t.Fatalf("complete: exit %d; want an error quoting the provider's, escaped\n%q%q", res.code, res.stdout, res.stderr)
	}
	// A usage error keeps its lines.
	res = runMain(t, nil, "", "--config", path, "complete")
	if res.code != 2 || !strings.Contains(res.stderr, "\nusage: opentalon complete") && !strings.Contains(res.stderr, "; usage: opentalon complete") {
		t.Fatalf("complete without a prompt: exit %d %q", res.code, res.stderr)
	}
}

func TestTermLinesKeepsLinesAndTabs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"plain\n  second\tcell", "plain\n  second\tcell"},
		{"crlf\r\nnext", "crlf\nnext"},
		{"lone\rcr", `lone\x0dcr`},
		{"a\x1b[2J\n\u009bb\u202e", `a\x1b[2J` + "\n" + `\u009bb\u202e`},
	} {
		if got := termLines(c.in); got != c.want {
			t.Errorf("termLines(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A config with several problems fails doctor's config check with one
// problem a line, as `config check` lists them; a line quoted from a
// provider cannot pass for a check's: every line is a check's or indented.
func TestDoctorKeepsTheConfigProblemsLines(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, doctorConfig(t.TempDir(), "http://127.0.0.1:9")+"\nfrobnicate: 1\nwobble: 2\n")
	res := runMain(t, nil, "", "--config", path, "doctor", "--offline")
	if res.code != 1 || strings.Contains(res.stdout, "⏎") {
		t.Fatalf("doctor: exit %d\n%s", res.code, res.stdout)
	}
	for _, key := range []string{`"frobnicate"`, `"wobble"`} {
		found := false
		for _, l := range strings.Split(res.stdout, "\n") {
			found = found || strings.HasPrefix(l, "  ") && strings.Contains(l, key)
		}
		if !found {
			t.Errorf("doctor lists no indented line for the unknown key %s:\n%s", key, res.stdout)
		}
	}
	assertCheckLines(t, res.stdout)
}

// assertCheckLines fails when a line of doctor's output neither starts
// with a check's status nor is indented.
func assertCheckLines(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "ok    ") &&
			!strings.HasPrefix(l, "warn  ") && !strings.HasPrefix(l, "FAIL  ") && !strings.HasPrefix(l, "skip  ") {
			t.Errorf("doctor line %q is neither a check's nor indented:\n%s", l, out)
		}
	}
}

// TestMemoryListCutsBeforeEscaping: a long memory is cut to 120
// characters of what was written, then escaped, so the cut never ends
// inside an escape and an invalid byte stays visible.
func TestMemoryListCutsBeforeEscaping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	content := strings.Repeat("a", 115) + "\x1b[2J\xff" + strings.Repeat("b", 10)
	if _, err := db.SaveMemory(ctx, core.Memory{Owner: "telegram:42", Content: content}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runMemory(ctx, db, []string{"list"}, &out); err != nil {
		t.Fatal(err)
	}
	assertTermSafe(t, "memory list", out.String())
	if want := strings.Repeat("a", 115) + `\x1b[...`; !strings.Contains(out.String(), want) {
		t.Errorf("memory list:\n%q\nwant the content cut after the whole escape: %q", out.String(), want)
	}
	if cutRunes("a\xffbc", 2) != "a\xff" || cutRunes("äö", 5) != "äö" {
		t.Errorf("cutRunes: %q %q", cutRunes("a\xffbc", 2), cutRunes("äö", 5))
	}
}
