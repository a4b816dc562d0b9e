package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// usageStore is what `opentalon usage` needs; *store.DB has it.
type usageStore interface {
	UsageTotals(ctx context.Context, since time.Time, by, conversation string) ([]core.UsageTotal, error)
}

const usageUsage = "usage: opentalon usage [--json] [--since 24h|7d] [--by model|chat|user|purpose]"

// runUsage implements `opentalon usage [--json] [--since 24h|7d] [--by
// model|chat|user]`: tokens and cost from the ledger. args are the words
// after "usage".
func runUsage(ctx context.Context, db usageStore, now time.Time, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("opentalon usage", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	span := sinceFlag{text: "24h", d: 24 * time.Hour}
	fs.Var(&span, "since", "how far back (24h, 90m, 7d)")
	by := fs.String("by", "model", "group by model, chat, user or purpose")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if span.bad != "" {
			return usageError{fmt.Sprintf("usage: --since %q: write a positive duration like 24h, 90m or 7d; %s", span.bad, usageUsage)}
		}
		return flagsError("usage", err, fs.Args(), usageUsage)
	}
	switch *by {
	case "model", "chat", "user", "purpose":
	default:
		return usageError{fmt.Sprintf("usage: --by %q is not one of model, chat, user, purpose; %s", *by, usageUsage)}
	}
	rows, err := db.UsageTotals(ctx, now.Add(-span.d), *by, "")
	if err != nil {
		return err
	}
	if *asJSON {
		type row struct {
			Key          string  `json:"key"`
			Calls        int     `json:"calls"`
			InputTokens  int64   `json:"input_tokens"`
			OutputTokens int64   `json:"output_tokens"`
			CostUSD      float64 `json:"cost_usd"`
		}
		out := struct {
			Since string `json:"since"`
			By    string `json:"by"`
			Rows  []row  `json:"rows"`
		}{now.Add(-span.d).UTC().Format(time.RFC3339), *by, []row{}}
		for _, r := range rows {
			out.Rows = append(out.Rows, row{r.Key, r.Calls, r.InputTokens, r.OutputTokens, r.CostUSD})
		}
		return writeTermJSON(stdout, out)
	}
	// A chat's or a user's name is what its platform or user chose: made
	// safe for the terminal (termText).
	rowsOut := [][]string{{map[string]string{"model": "MODEL", "chat": "CHAT", "user": "USER", "purpose": "PURPOSE"}[*by], "CALLS", "INPUT", "OUTPUT", "COST USD"}}
	var total core.UsageTotal
	for _, r := range rows {
		rowsOut = append(rowsOut, []string{dash(termText(r.Key)), strconv.Itoa(r.Calls), strconv.FormatInt(r.InputTokens, 10),
			strconv.FormatInt(r.OutputTokens, 10), fmt.Sprintf("%.4f", r.CostUSD)})
		total.Calls += r.Calls
		total.InputTokens += r.InputTokens
		total.OutputTokens += r.OutputTokens
		total.CostUSD += r.CostUSD
	}
	rowsOut = append(rowsOut, []string{"TOTAL (last " + span.text + ")", strconv.Itoa(total.Calls), strconv.FormatInt(total.InputTokens, 10),
		strconv.FormatInt(total.OutputTokens, 10), fmt.Sprintf("%.4f", total.CostUSD)})
	return writeTable(stdout, rowsOut)
}

// sinceFlag is usage's --since: a Go duration (24h, 90m) or whole days
// (7d, as the status page counts them), positive.
type sinceFlag struct {
	text string
	d    time.Duration
	bad  string // the value refused, for the error
}

func (f *sinceFlag) String() string { return f.text }

func (f *sinceFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if days, ok := strings.CutSuffix(v, "d"); ok && err != nil {
		n, nerr := strconv.Atoi(days)
		d, err = time.Duration(n)*24*time.Hour, nerr
	}
	if err != nil || d <= 0 {
		f.bad = v
		return fmt.Errorf("bad --since %q", v)
	}
	f.text, f.d = v, d
	return nil
}

// cmdRouting runs `usage`, `affinity`, `pair` and `bench`; each parses its own
// flags, so only the global flags are taken out here.
func cmdRouting(ctx context.Context, cmd string, g *globalFlags, args []string, stdio Stdio, env config.Env, log *slog.Logger) error {
	args = g.extract(args)
	if cmd == "bench" {
		return runBenchRoute(ctx, args, stdio.Out)
	}
	run := func(db routingStore, decayDays float64, aliases map[string]string, out io.Writer) error {
		switch cmd {
		case "usage":
			return runUsage(ctx, db, time.Now(), args, out)
		case "pair":
			return runPair(ctx, db, time.Now(), args, out)
		}
		return runAffinity(ctx, db, decayDays, aliases, time.Now(), args, out)
	}
	// The command line first: its mistakes are not hidden behind the
	// config's or the database's.
	if err := run(argsOnly{}, 30, nil, io.Discard); !errors.Is(err, errArgsOK) {
		return err
	}
	// The database and the keys affinity reads (its decay; the catalog's
	// aliases, for affinity alone); nothing else of the config (no LLM
	// provider) is needed.
	keys := []string{"routing.affinity"}
	if cmd == "affinity" {
		keys = append(keys, "models.catalog", "cluster")
	}
	cfg, db, err := openConfigStore(ctx, g, env, log, keys...)
	if err != nil {
		return err
	}
	defer db.Close()
	if cmd == "affinity" && len(args) > 0 && args[0] == "reset" {
		release, err := noGatewayRunning(ctx, cfg, db)
		if err != nil {
			return fmt.Errorf("affinity reset refused: %w; a running gateway keeps what its router learned in memory and writes it back, so the reset would not hold", err)
		}
		defer release()
	}
	aliases := map[string]string{}
	for ref, e := range cfg.Models.Catalog {
		aliases[ref] = ref
		if e.Alias != "" {
			aliases[e.Alias] = ref
		}
	}
	return run(db, float64(cfg.Routing.Affinity.DecayDays), aliases, stdio.Out)
}

// routingStore is what usage, pair and affinity need; *store.DB has it.
type routingStore interface {
	usageStore
	pairStore
	affinityStore
}

// argsOnly is a store at which a command stops at its first query with
// errArgsOK: a command run against it checks its command line only.
type argsOnly struct{}

var errArgsOK = errors.New("the command line is accepted")

func (argsOnly) UsageTotals(context.Context, time.Time, string, string) ([]core.UsageTotal, error) {
	return nil, errArgsOK
}
func (argsOnly) Pairings(context.Context, string) ([]core.Pairing, error) { return nil, errArgsOK }
func (argsOnly) DecidePairing(context.Context, string, string, bool, string) (core.Pairing, error) {
	return core.Pairing{}, errArgsOK
}
func (argsOnly) Affinities(context.Context) ([]core.Affinity, error) { return nil, errArgsOK }
func (argsOnly) ResetAffinity(context.Context, string, string) (int64, error) {
	return 0, errArgsOK
}
func (argsOnly) PluginBindings(context.Context) ([]core.PluginBinding, error) {
	return nil, errArgsOK
}
func (argsOnly) PluginUnbind(context.Context, string) (bool, error) { return false, errArgsOK }
func (argsOnly) Memories(context.Context, core.MemoryQuery) ([]core.Memory, error) {
	return nil, errArgsOK
}
func (argsOnly) DeleteMemory(context.Context, int64, string, bool) (bool, error) {
	return false, errArgsOK
}
func (argsOnly) DeleteMemories(context.Context, string) (int, error) { return 0, errArgsOK }
func (argsOnly) ConversationSessions(context.Context, core.ConversationKey) ([]store.SessionRecord, error) {
	return nil, errArgsOK
}
func (argsOnly) Transcript(context.Context, int64) ([]store.StoredMessage, error) {
	return nil, errArgsOK
}

// noGatewayRunning makes sure no gateway runs on cfg's database, and
// keeps it so until release: on SQLite it takes the data directory's
// lock; on PostgreSQL it finds no replica heard from within three
// cluster.heartbeats that has not stopped.
func noGatewayRunning(ctx context.Context, cfg *config.Config, db *store.DB) (release func(), err error) {
	if !clustered(cfg) {
		lock, err := lockDataDir(cfg.State.DataDir)
		if err != nil {
			return nil, err
		}
		return func() { lock.release() }, nil
	}
	window := 3 * cfg.Cluster.Heartbeat.D()
	rs, err := db.Replicas(ctx, time.Now().Add(-window))
	if err != nil {
		return nil, err
	}
	var running []string
	for _, r := range rs {
		if r.Stopped.IsZero() {
			running = append(running, r.ID)
		}
	}
	if len(running) > 0 {
		return nil, fmt.Errorf("%d replica(s) run on this database (%s, heard from within %s); stop them first", len(running), strings.Join(running, ", "), window)
	}
	return func() {}, nil
}
