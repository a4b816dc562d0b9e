package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// memoryStore is what `opentalon memory` and `opentalon session` need;
// *store.DB has it.
type memoryStore interface {
	Memories(ctx context.Context, q core.MemoryQuery) ([]core.Memory, error)
	DeleteMemory(ctx context.Context, id int64, owner string, admin bool) (bool, error)
	DeleteMemories(ctx context.Context, owner string) (int, error)
	ConversationSessions(ctx context.Context, conv core.ConversationKey) ([]store.SessionRecord, error)
	Transcript(ctx context.Context, sessionID int64) ([]store.StoredMessage, error)
}

const (
	memoryUsage = "usage: opentalon memory list [--user CHANNEL:ID] [--tag T] [--limit N] [--json]\n" +
		"       opentalon memory search [--user CHANNEL:ID] [--tag T] [--limit N] [--json] WORDS...\n" +
		"       opentalon memory delete ID... | opentalon memory delete --user CHANNEL:ID --all\n" +
		"       opentalon memory export [--user CHANNEL:ID] [--tag T] [--format yaml|json]"
	sessionUsage = "usage: opentalon session export [--format yaml|json] [--out FILE] CONVERSATION (channel:chat[:thread], e.g. console:local; among replicas on PostgreSQL a terminal's is console:local:<replica>)"
)

// cmdMemory runs `memory` and `session`; each parses its own flags, so
// only the global flags are taken out here.
func cmdMemory(ctx context.Context, cmd string, g *globalFlags, args []string, stdio Stdio, env config.Env, log *slog.Logger) error {
	args = g.extract(args)
	run := runMemory
	if cmd == "session" {
		run = runSession
	}
	// The command line first, as usage and affinity do: its mistakes are
	// not hidden behind the config's, and open no database.
	if err := run(ctx, argsOnly{}, args, io.Discard); !errors.Is(err, errArgsOK) {
		return err
	}
	_, db, err := openConfigStore(ctx, g, env, log)
	if err != nil {
		return err
	}
	defer db.Close()
	return run(ctx, db, args, stdio.Out)
}

// memoryFlags are the flags shared by the memory subcommands.
type memoryFlags struct {
	user, tag, format string
	limit             int
	json, all         bool
}

func (f *memoryFlags) parse(sub string, args []string) ([]string, error) {
	fs := flag.NewFlagSet("opentalon memory "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.user, "user", "", "only this user's memories (channel:user id)")
	fs.StringVar(&f.tag, "tag", "", "only memories with this tag")
	fs.IntVar(&f.limit, "limit", 100, "at most this many")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.BoolVar(&f.all, "all", false, "with --user: every memory of the user")
	fs.StringVar(&f.format, "format", "yaml", "yaml or json")
	// Flags may follow the words (memory search deploy --user x).
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if fl := fs.Lookup(name); fl != nil && !strings.Contains(name, "=") {
				if bf, ok := fl.Value.(interface{ IsBoolFlag() bool }); !ok || !bf.IsBoolFlag() {
					if i+1 < len(args) {
						i++
						flags = append(flags, args[i])
					}
				}
			}
			continue
		}
		pos = append(pos, a)
	}
	if err := fs.Parse(flags); err != nil {
		return nil, usageError{fmt.Sprintf("memory %s: %v\n%s", sub, err, memoryUsage)}
	}
	if f.user != "" && !strings.Contains(f.user, ":") {
		return nil, usageError{fmt.Sprintf("memory %s: --user %q is not CHANNEL:ID (for example telegram:123456789 or console:local)", sub, f.user)}
	}
	if f.limit <= 0 {
		return nil, usageError{fmt.Sprintf("memory %s: --limit must be positive", sub)}
	}
	return pos, nil
}

// runMemory implements `opentalon memory list|search|delete|export`.
func runMemory(ctx context.Context, db memoryStore, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"memory: missing the subcommand (list, search, delete or export)\n" + memoryUsage}
	}
	sub := args[0]
	var f memoryFlags
	pos, err := f.parse(sub, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "list", "search":
		q := core.MemoryQuery{Owner: f.user, WithShared: f.user != "", Tag: f.tag, Limit: f.limit}
		if sub == "search" {
			if len(pos) == 0 {
				return usageError{"memory search: give the words to look for\n" + memoryUsage}
			}
			q.Text = strings.Join(pos, " ")
		} else if len(pos) > 0 {
			return usageError{fmt.Sprintf("memory list takes no words, got %q (use memory search)\n%s", pos, memoryUsage)}
		}
		ms, err := db.Memories(ctx, q)
		if err != nil {
			return err
		}
		if f.json {
			return writeTermJSON(out, exportMemories(ms))
		}
		return printMemories(out, ms)
	case "delete":
		return deleteMemories(ctx, db, f, pos, out)
	case "export":
		if err := checkFormat("memory export", f.format, memoryUsage); err != nil {
			return err
		}
		if len(pos) > 0 {
			return usageError{fmt.Sprintf("memory export takes no words, got %q\n%s", pos, memoryUsage)}
		}
		ms, err := db.Memories(ctx, core.MemoryQuery{Owner: f.user, Tag: f.tag, Limit: 1 << 30})
		if err != nil {
			return err
		}
		var v any = exportMemories(ms)
		if strings.EqualFold(f.tag, core.TagWorkflow) {
			v = exportWorkflows(ms)
		}
		return writeAs(out, f.format, v)
	}
	return usageError{fmt.Sprintf("memory: unknown subcommand %q\n%s", sub, memoryUsage)}
}

func deleteMemories(ctx context.Context, db memoryStore, f memoryFlags, ids []string, out io.Writer) error {
	if f.all {
		if f.user == "" || len(ids) > 0 {
			return usageError{"memory delete --all needs --user CHANNEL:ID and no ids\n" + memoryUsage}
		}
		n, err := db.DeleteMemories(ctx, f.user)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "deleted %d memories of %s\n", n, f.user)
		return nil
	}
	if len(ids) == 0 {
		return usageError{"memory delete: give the ids to delete (memory list shows them)\n" + memoryUsage}
	}
	// Every id is checked before any is deleted: a typo deletes nothing.
	nums := make([]int64, len(ids))
	for i, s := range ids {
		id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
		if err != nil {
			return usageError{fmt.Sprintf("memory delete: %q is not a memory id (a number); nothing was deleted\n%s", s, memoryUsage)}
		}
		nums[i] = id
	}
	var missing []string
	for i, s := range ids {
		id := nums[i]
		ok, err := db.DeleteMemory(ctx, id, f.user, true)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, s)
			continue
		}
		fmt.Fprintf(out, "deleted memory %d\n", id)
	}
	if len(missing) > 0 {
		return core.Errorf(core.KindNotFound, "no memory %s (memory list shows the ids)", strings.Join(missing, ", "))
	}
	return nil
}

// cutRunes returns s's first n characters, keeping its bytes as they are
// (an invalid byte counts as one and stays for termText to show).
func cutRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// printMemories writes ms as a table; what users wrote (the content,
// the tags, a workflow's steps) is made safe for the terminal (termText).
func printMemories(out io.Writer, ms []core.Memory) error {
	if len(ms) == 0 {
		fmt.Fprintln(out, "no memories")
		return nil
	}
	rows := [][]string{{"ID", "OWNER", "TAGS", "CREATED", "CONTENT"}}
	for _, m := range ms {
		owner := m.Owner
		if m.Shared {
			owner += " (shared)"
		}
		content := strings.ReplaceAll(m.Content, "\n", " ")
		if m.HasTag(core.TagWorkflow) {
			names := make([]string, len(m.Steps))
			for i, s := range m.Steps {
				names[i] = s.Plugin + "." + s.Action
			}
			content = fmt.Sprintf("%q → %s [%s]", content, strings.Join(names, ", "), m.Outcome)
		}
		// Cut what was written, then escape it: a cut after escaping
		// could end inside an escape (`\x1`).
		if utf8.RuneCountInString(content) > 120 {
			content = cutRunes(content, 117) + "..."
		}
		content = termText(content)
		rows = append(rows, []string{strconv.FormatInt(m.ID, 10), termText(owner), termText(strings.Join(m.Tags, ",")),
			m.CreatedAt.UTC().Format("2006-01-02 15:04"), content})
	}
	return writeTable(out, rows)
}

// exportedMemory is a memory as `memory export` and `--json` write it.
type exportedMemory struct {
	ID     int64  `json:"id" yaml:"id"`
	Owner  string `json:"owner" yaml:"owner"`
	Shared bool   `json:"shared,omitempty" yaml:"shared,omitempty"`
	// Place is the group the memory was saved in (core.MemoryPlace);
	// absent for a private chat's.
	Place     string              `json:"place,omitempty" yaml:"place,omitempty"`
	Content   string              `json:"content" yaml:"content"`
	Tags      []string            `json:"tags,omitempty" yaml:"tags,omitempty"`
	Steps     []core.WorkflowStep `json:"steps,omitempty" yaml:"steps,omitempty"`
	Outcome   string              `json:"outcome,omitempty" yaml:"outcome,omitempty"`
	CreatedAt string              `json:"created_at" yaml:"created_at"`
}

func exportMemories(ms []core.Memory) []exportedMemory {
	out := make([]exportedMemory, 0, len(ms))
	for _, m := range ms {
		out = append(out, exportedMemory{ID: m.ID, Owner: m.Owner, Shared: m.Shared, Place: m.Place, Content: m.Content, Tags: m.Tags,
			Steps: m.Steps, Outcome: m.Outcome, CreatedAt: m.CreatedAt.UTC().Format(time.RFC3339)})
	}
	return out
}

// exportedWorkflow is a workflow in the format of the design document:
// trigger, ordered steps, outcome, timestamp.
type exportedWorkflow struct {
	Trigger   string              `json:"trigger" yaml:"trigger"`
	Steps     []core.WorkflowStep `json:"steps" yaml:"steps"`
	Outcome   string              `json:"outcome" yaml:"outcome"`
	Timestamp string              `json:"timestamp" yaml:"timestamp"`
}

func exportWorkflows(ms []core.Memory) []exportedWorkflow {
	out := make([]exportedWorkflow, 0, len(ms))
	for _, m := range ms {
		if !m.HasTag(core.TagWorkflow) {
			continue
		}
		out = append(out, exportedWorkflow{Trigger: m.Content, Steps: m.Steps, Outcome: m.Outcome, Timestamp: m.UpdatedAt.UTC().Format(time.RFC3339)})
	}
	return out
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// checkFormat checks cmd's --format (use: its usage).
func checkFormat(cmd, format, use string) error {
	switch strings.ToLower(format) {
	case "json", "yaml", "yml":
		return nil
	}
	return usageError{fmt.Sprintf("%s --format %q: use yaml or json\n%s", cmd, format, use)}
}

func writeAs(out io.Writer, format string, v any) error {
	if err := checkFormat("export", format, ""); err != nil {
		return err
	}
	if strings.EqualFold(format, "json") {
		return writeTermJSON(out, v)
	}
	return writeTermYAML(out, v)
}

// exportedSession is one session of `session export`.
type exportedSession struct {
	ID         int64              `json:"id" yaml:"id"`
	Active     bool               `json:"active" yaml:"active"`
	CreatedAt  string             `json:"created_at" yaml:"created_at"`
	LastAccess string             `json:"last_access" yaml:"last_access"`
	EndedAt    string             `json:"ended_at,omitempty" yaml:"ended_at,omitempty"`
	ModelPin   string             `json:"model_pin,omitempty" yaml:"model_pin,omitempty"`
	Usage      exportedUsage      `json:"usage" yaml:"usage"`
	State      exportedState      `json:"state" yaml:"state"`
	Messages   []exportedMessages `json:"messages" yaml:"messages"`
}

type exportedUsage struct {
	InputTokens  int     `json:"input_tokens" yaml:"input_tokens"`
	OutputTokens int     `json:"output_tokens" yaml:"output_tokens"`
	CostUSD      float64 `json:"cost_usd" yaml:"cost_usd"`
}

type exportedState struct {
	RecentTools   []string `json:"recent_tools,omitempty" yaml:"recent_tools,omitempty"`
	ActiveModel   string   `json:"active_model,omitempty" yaml:"active_model,omitempty"`
	ActiveProfile string   `json:"active_profile,omitempty" yaml:"active_profile,omitempty"`
	Step          string   `json:"step,omitempty" yaml:"step,omitempty"`
	StepIndex     int      `json:"step_index,omitempty" yaml:"step_index,omitempty"`
	Compactions   int      `json:"compactions,omitempty" yaml:"compactions,omitempty"`
}

type exportedMessages struct {
	At   string    `json:"at" yaml:"at"`
	Role core.Role `json:"role" yaml:"role"`
	// Name is a group message's speaker (core.SpeakerName).
	Name       string          `json:"name,omitempty" yaml:"name,omitempty"`
	Summary    bool            `json:"summary,omitempty" yaml:"summary,omitempty"`
	Content    string          `json:"content,omitempty" yaml:"content,omitempty"`
	ToolCalls  []core.ToolCall `json:"tool_calls,omitempty" yaml:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty" yaml:"tool_call_id,omitempty"`
}

// runSession implements `opentalon session export [--format yaml|json]
// [--out FILE] CONVERSATION`: every session of the conversation still in
// the database (the active one and those ended by /new that have not
// expired), oldest first, with their messages.
func runSession(ctx context.Context, db memoryStore, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "export" {
		return subUsageError("session", args, "export", sessionUsage)
	}
	fs := flag.NewFlagSet("opentalon session export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	format := fs.String("format", "yaml", "yaml or json")
	file := fs.String("out", "", "write to this file instead of standard output")
	var pos []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return usageError{fmt.Sprintf("session export: %v\n%s", err, sessionUsage)}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) != 1 {
		return argCountError("session export", pos, 1, "CONVERSATION", sessionUsage)
	}
	if err := checkFormat("session export", *format, sessionUsage); err != nil {
		return err
	}
	conv := core.ParseConversationKey(pos[0])
	if conv.Channel == "" || conv.Chat == "" {
		return usageError{fmt.Sprintf("session export: %q is not a conversation; %s", pos[0], sessionUsage)}
	}
	sessions, err := db.ConversationSessions(ctx, conv)
	if err != nil {
		return err
	}
	if len(sessions) == 0 {
		return core.Errorf(core.KindNotFound, "no session of conversation %s in the database (it never wrote, or its sessions expired after state.session_ttl); conversations are channel:chat[:thread], e.g. console:local", conv)
	}
	doc := struct {
		Conversation string            `json:"conversation" yaml:"conversation"`
		Sessions     []exportedSession `json:"sessions" yaml:"sessions"`
	}{Conversation: conv.String()}
	for _, s := range sessions {
		msgs, err := db.Transcript(ctx, s.ID)
		if err != nil {
			return err
		}
		es := exportedSession{ID: s.ID, Active: s.Active, CreatedAt: rfc3339(s.CreatedAt), LastAccess: rfc3339(s.LastAccess),
			EndedAt: rfc3339(s.EndedAt), ModelPin: s.ModelPin, Messages: []exportedMessages{},
			Usage: exportedUsage{s.Usage.InputTokens, s.Usage.OutputTokens, s.Usage.CostUSD},
			State: exportedState{s.State.RecentTools, s.State.ActiveModel, s.State.ActiveProfile, s.State.Step, s.State.StepIndex, s.State.Compactions}}
		for _, m := range msgs {
			es.Messages = append(es.Messages, exportedMessages{At: rfc3339(m.CreatedAt), Role: m.Role, Name: m.Name, Summary: m.Summary,
				Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
		}
		doc.Sessions = append(doc.Sessions, es)
	}
	if *file == "" {
		return writeAs(out, *format, doc)
	}
	f, err := os.OpenFile(*file, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("session export --out: %w", err)
	}
	if err := writeAs(f, *format, doc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
