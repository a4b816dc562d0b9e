package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// queueStore is what `opentalon queue` reads; *store.DB has it. Every
// call is a read: the command takes no lease and writes nothing.
type queueStore interface {
	QueueEntries(ctx context.Context, q store.QueueQuery) ([]store.QueueEntry, error)
	QueueEntry(ctx context.Context, id int64) (store.QueueEntry, bool, error)
	QueueTally(ctx context.Context, conversation string, since time.Time) (store.QueueTally, error)
	ReplyForRequest(ctx context.Context, requestID int64, conv core.ConversationKey) (*core.Reply, error)
}

const queueUsage = "usage: opentalon queue [--json] [--status queued|running|failed|done|all] [--conversation CONV] [--limit N] | opentalon queue show ID [--json]"

// queueRecent is how far back the default listing shows failures.
const queueRecent = 24 * time.Hour

// queueArgs is the command line of `opentalon queue`.
type queueArgs struct {
	json         bool
	status       string // "" is the default view
	conversation string // normalized; "" = every conversation
	limit        int
	show         int64 // > 0: `queue show ID`
}

// parseQueueArgs reads the words after "queue" (the global flags taken
// out or accepted).
func parseQueueArgs(g *globalFlags, args []string, stdio Stdio) (queueArgs, error) {
	a := queueArgs{limit: 50}
	pos, err := parseSub("queue", g, args, stdio, func(fs *flag.FlagSet) {
		fs.BoolVar(&a.json, "json", false, "print JSON")
		fs.StringVar(&a.status, "status", "", "queued, running, failed, done or all")
		fs.StringVar(&a.conversation, "conversation", "", "only this conversation (channel:chat[:thread])")
		fs.IntVar(&a.limit, "limit", 50, "at most this many items")
	})
	if err != nil {
		return a, err
	}
	given := givenFlags(args)
	if len(pos) > 0 {
		if pos[0] != "show" {
			return a, usageError{fmt.Sprintf("queue: unknown subcommand %q (show); %s", pos[0], queueUsage)}
		}
		if len(pos) != 2 {
			return a, argCountError("queue show", pos[1:], 1, "ID (a number; opentalon queue lists them)", queueUsage)
		}
		for _, f := range []string{"status", "conversation", "limit"} {
			if given[f] {
				return a, usageError{fmt.Sprintf("queue show takes only --json, not --%s (that filters the list: opentalon queue --%s ...); %s", f, f, queueUsage)}
			}
		}
		id, err := strconv.ParseInt(strings.TrimPrefix(pos[1], "#"), 10, 64)
		if err != nil || id <= 0 {
			return a, usageError{fmt.Sprintf("queue show: %q is not a queue item id: give the number in the ID column of opentalon queue; %s", pos[1], queueUsage)}
		}
		a.show = id
		return a, nil
	}
	switch a.status {
	case "", "all", core.StatusQueued, core.StatusRunning, core.StatusFailed, core.StatusDone:
	default:
		return a, usageError{fmt.Sprintf("queue: --status %q is not one of queued, running, failed, done, all; %s", a.status, queueUsage)}
	}
	if a.limit <= 0 {
		return a, usageError{fmt.Sprintf("queue: --limit %d: give a positive number of items; %s", a.limit, queueUsage)}
	}
	if a.conversation != "" {
		c := core.ParseConversationKey(a.conversation)
		if c.Channel == "" || c.Chat == "" {
			return a, usageError{fmt.Sprintf("queue: --conversation %q is not a conversation: write channel:chat[:thread], e.g. telegram:123456789 or console:local (the CONVERSATION column shows them); %s", a.conversation, queueUsage)}
		}
		a.conversation = c.String()
	}
	return a, nil
}

// givenFlags are the names of the flags args sets (before a "--").
func givenFlags(args []string) map[string]bool {
	out := map[string]bool{}
	for _, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			out[name] = true
		}
	}
	return out
}

// cmdQueue implements `opentalon queue`: it reads the request queue,
// beside a running gateway too (it opens the database as usage does,
// without the data directory's lock, and only reads).
func cmdQueue(ctx context.Context, g *globalFlags, args []string, stdio Stdio, env config.Env, log *slog.Logger) error {
	// The command line first: its mistakes are not hidden behind the
	// config's or the database's.
	a, err := parseQueueArgs(g, args, stdio)
	if err != nil {
		return err
	}
	_, db, err := openConfigStore(ctx, g, env, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if a.show > 0 {
		return runQueueShow(ctx, db, time.Now(), a, stdio.Out)
	}
	return runQueueList(ctx, db, time.Now(), a, stdio.Out)
}

// runQueueList lists the items a selects, with the counts by status.
func runQueueList(ctx context.Context, db queueStore, now time.Time, a queueArgs, out io.Writer) error {
	unfinished := []string{core.StatusQueued, core.StatusRunning}
	var es []store.QueueEntry
	list := func(q store.QueueQuery) error {
		q.Conversation, q.Limit = a.conversation, a.limit
		got, err := db.QueueEntries(ctx, q)
		es = append(es, got...)
		return err
	}
	var err error
	switch a.status {
	case "":
		// What waits or runs, the order it runs in; then what failed in
		// the last 24 hours, newest first.
		if err = list(store.QueueQuery{Statuses: unfinished}); err == nil {
			err = list(store.QueueQuery{Statuses: []string{core.StatusFailed}, Since: now.Add(-queueRecent), NewestFirst: true})
		}
	case core.StatusQueued, core.StatusRunning:
		err = list(store.QueueQuery{Statuses: []string{a.status}})
	case core.StatusFailed, core.StatusDone:
		err = list(store.QueueQuery{Statuses: []string{a.status}, NewestFirst: true})
	default: // all
		err = list(store.QueueQuery{NewestFirst: true})
	}
	if err != nil {
		return err
	}
	tally, err := db.QueueTally(ctx, a.conversation, now.Add(-queueRecent))
	if err != nil {
		return err
	}
	// How many the filter matches, to say what --limit left out.
	matched := map[string]int{
		"":                 tally.ByStatus[core.StatusQueued] + tally.ByStatus[core.StatusRunning] + tally.FailedSince,
		core.StatusQueued:  tally.ByStatus[core.StatusQueued],
		core.StatusRunning: tally.ByStatus[core.StatusRunning],
		core.StatusFailed:  tally.ByStatus[core.StatusFailed],
		core.StatusDone:    tally.ByStatus[core.StatusDone],
	}
	for _, n := range tally.ByStatus {
		matched["all"] += n
	}
	if a.json {
		counts := map[string]int{core.StatusQueued: 0, core.StatusRunning: 0, core.StatusFailed: 0, core.StatusDone: 0}
		for s, n := range tally.ByStatus {
			counts[s] = n
		}
		doc := queueListJSON{Status: cmp.Or(a.status, "default"), Conversation: a.conversation, Limit: a.limit,
			Counts: counts, FailedLast24h: tally.FailedSince, Matched: matched[a.status], Items: []queueItemJSON{}}
		for _, e := range es {
			doc.Items = append(doc.Items, entryJSON(e, now))
		}
		return writeTermJSON(out, doc)
	}
	fmt.Fprintln(out, queueSummary(tally, a.conversation))
	if len(es) == 0 {
		switch a.status {
		case "":
			fmt.Fprintln(out, "nothing waits or runs, and nothing failed in the last 24h (opentalon queue --status all lists every item kept)")
		default:
			fmt.Fprintln(out, "no queue items match")
		}
		return nil
	}
	// Every text from the database is made safe for the terminal
	// (termText): a user's name, an error a provider wrote.
	table := [][]string{{"ID", "CONVERSATION", "KIND", "USER", "STATUS", "TRIES", "INTR", "AGE", "NOT BEFORE", "HOLDER / LEASE", "LAST ERROR"}}
	var unreadable []string
	for _, e := range es {
		status := e.Status
		if e.Waiting && e.Status == core.StatusRunning {
			status += " (waits for a model)"
		}
		table = append(table, []string{strconv.FormatInt(e.ID, 10), termText(e.Conversation.String()), termText(string(e.Kind)),
			dash(termText(entryUser(e))), termText(status), strconv.Itoa(e.Attempts), strconv.Itoa(e.Interruptions),
			humanSpan(now.Sub(e.CreatedAt)), notBefore(e, now), termText(holderLease(e, now)), dash(cut(oneLine(e.LastError), 60))})
		if e.PayloadError != "" {
			unreadable = append(unreadable, fmt.Sprintf("#%d: %s", e.ID, termText(e.PayloadError)))
		}
	}
	if err := writeTable(out, table); err != nil {
		return err
	}
	for _, u := range unreadable {
		fmt.Fprintln(out, u)
	}
	if n := matched[a.status]; n > len(es) {
		fmt.Fprintf(out, "showing %d of %d; --limit %d shows more per status\n", len(es), n, a.limit)
	}
	return nil
}

// queueSummary is the list's first line: the counts by status.
func queueSummary(t store.QueueTally, conv string) string {
	var parts []string
	for _, s := range []string{core.StatusQueued, core.StatusRunning, core.StatusFailed, core.StatusDone} {
		p := fmt.Sprintf("%d %s", t.ByStatus[s], s)
		if s == core.StatusFailed {
			p += fmt.Sprintf(" (%d in the last 24h)", t.FailedSince)
		}
		parts = append(parts, p)
	}
	// A status this release does not know still counts.
	var other []string
	for s := range t.ByStatus {
		switch s {
		case core.StatusQueued, core.StatusRunning, core.StatusFailed, core.StatusDone:
		default:
			other = append(other, fmt.Sprintf("%d %s", t.ByStatus[s], termText(s)))
		}
	}
	sort.Strings(other)
	where := "queue"
	if conv != "" {
		where = "queue of " + conv
	}
	return where + ": " + strings.Join(append(parts, other...), ", ")
}

// runQueueShow prints one item in full.
func runQueueShow(ctx context.Context, db queueStore, now time.Time, a queueArgs, out io.Writer) error {
	e, ok, err := db.QueueEntry(ctx, a.show)
	if err != nil {
		return err
	}
	if !ok {
		return core.Errorf(core.KindNotFound, "no queue item %d: it never was, or it finished longer ago than state.retention and was pruned (opentalon queue --status all lists the items kept)", a.show)
	}
	reply, err := db.ReplyForRequest(ctx, e.ID, e.Conversation)
	if err != nil {
		return err
	}
	if a.json {
		doc := entryJSON(e, now)
		doc.Reply = replyJSON(reply)
		return writeTermJSON(out, doc)
	}
	tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	// Every text from the database is made safe for the terminal
	// (termText) as its row is written: a user's name, a file's name, an
	// error a provider wrote.
	row := func(k, format string, v ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, termText(fmt.Sprintf(format, v...))) }
	row("id", "%d", e.ID)
	row("status", "%s", e.Status)
	row("kind", "%s", e.Kind)
	row("conversation", "%s", e.Conversation)
	row("dedupe key", "%s", dash(e.DedupeKey))
	row("accepted", "%s (%s ago)", stamp(e.CreatedAt), humanSpan(now.Sub(e.CreatedAt)))
	row("last change", "%s (%s ago)", stamp(e.UpdatedAt), humanSpan(now.Sub(e.UpdatedAt)))
	row("attempts", "%d ended (a retry, a failure or the last one), %d interrupted (a crash or a kill)", e.Attempts, e.Interruptions)
	if e.Status == core.StatusQueued {
		row("not before", "%s", notBefore(e, now))
	}
	if e.Status == core.StatusRunning {
		row("holder / lease", "%s", holderLease(e, now))
		if e.Waiting {
			row("waiting", "for a model's concurrency slot (llm.max_concurrent_*)")
		}
	}
	if e.Notified {
		row("notified", "the user was told the answer is delayed")
	}
	if e.LastError != "" {
		row("last error", "%s", oneLine(e.LastError))
	}
	switch {
	case e.PayloadError != "":
		row("event", "%s", e.PayloadError)
	case e.Message != nil:
		m := e.Message
		row("user", "%s", userOf(m.UserName, m.UserID))
		if m.Origin != "" {
			row("origin", "%s", m.Origin)
		}
		row("text", "%s", showText(m.Text, 300))
		if m.Context != "" {
			row("quoted", "%s", showText(m.Context, 200))
		}
		for i, f := range m.Files {
			row(fmt.Sprintf("file %d", i+1), "%s", fileLine(f))
		}
	case e.Reaction != nil:
		r := e.Reaction
		verb := "removed"
		if r.Added {
			verb = "added"
		}
		row("user", "%s", dash(r.UserID))
		row("reaction", "%s %s on message %s", verb, r.Emoji, dash(r.MessageID))
	case e.Firing != nil:
		f := e.Firing
		row("schedule", "#%d (%s), firing of %s, by %s", f.ScheduleID, dash(f.Source), stamp(f.At), dash(f.Creator))
		if f.Prompt != "" {
			row("prompt", "%s", showText(f.Prompt, 500))
		}
		if f.Plugin != "" {
			row("action", "%s.%s %s", f.Plugin, f.Action, argNames(f.Args))
		}
	}
	if reply == nil {
		row("reply", "none stored")
	} else {
		row("reply", "#%d, %d part(s), %d file(s), model %s, stored %s", reply.ID, len(reply.Parts), len(reply.Files), dash(reply.Model), stamp(reply.CreatedAt))
		if reply.Streaming {
			row("", "still streaming: its text is not final")
		}
		for _, d := range replyJSON(reply).Deliveries {
			row(fmt.Sprintf("  %s %d", d.What, d.Index+1), "%s", deliveryLine(d))
		}
	}
	return tw.Flush()
}

// queueListJSON is `opentalon queue --json`.
type queueListJSON struct {
	Status        string          `json:"status"`
	Conversation  string          `json:"conversation,omitempty"`
	Limit         int             `json:"limit"`
	Counts        map[string]int  `json:"counts"`
	FailedLast24h int             `json:"failed_last_24h"`
	Matched       int             `json:"matched"`
	Items         []queueItemJSON `json:"items"`
}

// queueItemJSON is one item of `queue --json` and `queue show --json`.
type queueItemJSON struct {
	ID            int64  `json:"id"`
	Conversation  string `json:"conversation"`
	Kind          string `json:"kind"`
	Status        string `json:"status"`
	DedupeKey     string `json:"dedupe_key"`
	Attempts      int    `json:"attempts"`
	Interruptions int    `json:"interruptions"`
	Notified      bool   `json:"notified"`
	Waiting       bool   `json:"waiting"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
	AgeSeconds    int64  `json:"age_seconds"`
	NotBefore     string `json:"not_before,omitempty"`
	Holder        string `json:"holder,omitempty"`
	LeaseUntil    string `json:"lease_until,omitempty"`
	LeaseExpired  bool   `json:"lease_expired,omitempty"`
	LastError     string `json:"last_error,omitempty"`
	PayloadError  string `json:"payload_error,omitempty"`

	UserID   string          `json:"user_id,omitempty"`
	UserName string          `json:"user_name,omitempty"`
	Text     string          `json:"text,omitempty"`
	Quoted   string          `json:"quoted,omitempty"`
	Origin   string          `json:"origin,omitempty"`
	Files    []queueFileJSON `json:"files,omitempty"`
	Reaction *reactionJSON   `json:"reaction,omitempty"`
	Schedule *firingJSON     `json:"schedule,omitempty"`
	Reply    *queueReplyJSON `json:"reply,omitempty"`
}

type queueFileJSON struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
	MIME string `json:"mime,omitempty"`
	Size int64  `json:"size,omitempty"`
}

type reactionJSON struct {
	Emoji     string `json:"emoji"`
	Added     bool   `json:"added"`
	MessageID string `json:"message_id"`
}

// firingJSON names a firing's arguments only: their values may be
// credentials a plugin's action takes.
type firingJSON struct {
	ID       int64    `json:"id"`
	Source   string   `json:"source,omitempty"`
	At       string   `json:"at"`
	Prompt   string   `json:"prompt,omitempty"`
	Plugin   string   `json:"plugin,omitempty"`
	Action   string   `json:"action,omitempty"`
	ArgNames []string `json:"arg_names,omitempty"`
	Model    string   `json:"model,omitempty"`
	Creator  string   `json:"creator,omitempty"`
}

type queueReplyJSON struct {
	ID         int64          `json:"id"`
	Model      string         `json:"model,omitempty"`
	CreatedAt  string         `json:"created_at"`
	Streaming  bool           `json:"streaming,omitempty"`
	Parts      int            `json:"parts"`
	Files      int            `json:"files"`
	Deliveries []deliveryJSON `json:"deliveries"`
}

// deliveryJSON is one part or file of a reply and whether it was sent.
type deliveryJSON struct {
	What       string `json:"what"` // part, file, or stream (a streamed message the final text no longer needs)
	Index      int    `json:"index"`
	Sent       bool   `json:"sent"`
	Draft      bool   `json:"draft,omitempty"`
	PlatformID string `json:"platform_id,omitempty"`
}

func entryJSON(e store.QueueEntry, now time.Time) queueItemJSON {
	j := queueItemJSON{ID: e.ID, Conversation: e.Conversation.String(), Kind: string(e.Kind), Status: e.Status, DedupeKey: e.DedupeKey,
		Attempts: e.Attempts, Interruptions: e.Interruptions, Notified: e.Notified, Waiting: e.Waiting,
		CreatedAt: rfc3339(e.CreatedAt), UpdatedAt: rfc3339(e.UpdatedAt), AgeSeconds: int64(now.Sub(e.CreatedAt) / time.Second),
		NotBefore: rfc3339(e.NotBefore), LastError: e.LastError, PayloadError: e.PayloadError}
	if e.Status == core.StatusRunning {
		j.Holder, j.LeaseUntil = e.Holder, rfc3339(e.LeaseUntil)
		j.LeaseExpired = !e.LeaseUntil.IsZero() && !e.LeaseUntil.After(now)
	}
	switch {
	case e.Message != nil:
		m := e.Message
		j.UserID, j.UserName, j.Text, j.Quoted, j.Origin = m.UserID, m.UserName, m.Text, m.Context, m.Origin
		for _, f := range m.Files {
			j.Files = append(j.Files, queueFileJSON{Kind: string(f.Kind), Name: f.Name, MIME: f.MIME, Size: f.Size})
		}
	case e.Reaction != nil:
		j.UserID = e.Reaction.UserID
		j.Reaction = &reactionJSON{Emoji: e.Reaction.Emoji, Added: e.Reaction.Added, MessageID: e.Reaction.MessageID}
	case e.Firing != nil:
		f := e.Firing
		var names []string
		for k := range f.Args {
			names = append(names, k)
		}
		sort.Strings(names)
		j.Schedule = &firingJSON{ID: f.ScheduleID, Source: f.Source, At: rfc3339(f.At), Prompt: f.Prompt, Plugin: f.Plugin, Action: f.Action,
			ArgNames: names, Model: f.Model, Creator: f.Creator}
	}
	return j
}

func replyJSON(r *core.Reply) *queueReplyJSON {
	if r == nil {
		return nil
	}
	j := &queueReplyJSON{ID: r.ID, Model: r.Model, CreatedAt: rfc3339(r.CreatedAt), Streaming: r.Streaming,
		Parts: len(r.Parts), Files: len(r.Files), Deliveries: []deliveryJSON{}}
	n := max(len(r.Sent), len(r.Parts)+len(r.Files))
	for i := range n {
		d := deliveryJSON{What: "part", Index: i}
		switch {
		case i >= len(r.Parts)+len(r.Files):
			d.What, d.Index = "stream", i
		case i >= len(r.Parts):
			d.What, d.Index = "file", i-len(r.Parts)
		}
		if i < len(r.Sent) && r.Sent[i] != "" {
			d.Sent, d.PlatformID = true, r.Sent[i]
			d.Draft = i < len(r.Draft) && r.Draft[i]
		}
		j.Deliveries = append(j.Deliveries, d)
	}
	return j
}

func deliveryLine(d deliveryJSON) string {
	switch {
	case !d.Sent:
		return "not sent"
	case d.Draft:
		return "sent as a streamed draft, not yet edited to its final text (platform id " + d.PlatformID + ")"
	}
	return "sent (platform id " + d.PlatformID + ")"
}

// entryUser is who the item is from, for the list: a message's sender, a
// reaction's; "?" when its event cannot be read.
func entryUser(e store.QueueEntry) string {
	switch {
	case e.PayloadError != "":
		return "?"
	case e.Message != nil:
		return userOf(e.Message.UserName, e.Message.UserID)
	case e.Reaction != nil:
		return e.Reaction.UserID
	case e.Firing != nil:
		return e.Firing.Creator
	}
	return ""
}

func userOf(name, id string) string {
	switch {
	case name != "" && id != "" && name != id:
		return name + " (" + id + ")"
	case id != "":
		return id
	}
	return name
}

// notBefore says when a queued item may run, if later than now.
func notBefore(e store.QueueEntry, now time.Time) string {
	if e.Status != core.StatusQueued || !e.NotBefore.After(now) {
		return "-"
	}
	return "in " + humanSpan(e.NotBefore.Sub(now))
}

// holderLease says who runs a running item and until when its lease
// holds: one whose lease ran out waits to be taken back (its process
// stopped or hangs).
func holderLease(e store.QueueEntry, now time.Time) string {
	if e.Status != core.StatusRunning {
		return "-"
	}
	h := dash(e.Holder)
	switch {
	case e.LeaseUntil.IsZero():
		return h + ", lease does not expire"
	case e.LeaseUntil.After(now):
		return fmt.Sprintf("%s, lease %s left", h, humanSpan(e.LeaseUntil.Sub(now)))
	}
	return fmt.Sprintf("%s, lease ran out %s ago", h, humanSpan(now.Sub(e.LeaseUntil)))
}

// humanSpan writes d to the second, in its two largest units.
func humanSpan(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine is s for the terminal (termText) with its runs of spaces
// made one.
func oneLine(s string) string {
	return strings.Join(strings.Fields(termText(s)), " ")
}

// cut shortens s to n characters (runes), marking the cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// showText is a message's text for the table: quoted, on one line, cut
// to n characters with how many more there are.
func showText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s… (%d more characters; --json prints the whole text)", strconv.Quote(string(r[:n])), len(r)-n)
}

func fileLine(f core.InboundFile) string {
	var parts []string
	for _, p := range []string{string(f.Kind), f.MIME} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if f.Size > 0 {
		parts = append(parts, humanBytes(f.Size))
	}
	return fmt.Sprintf("%s (%s)", dash(f.Name), strings.Join(parts, ", "))
}

// argNames lists a firing's argument names, not their values.
func argNames(args map[string]string) string {
	if len(args) == 0 {
		return ""
	}
	var names []string
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	return "(arguments: " + strings.Join(names, ", ") + ")"
}
