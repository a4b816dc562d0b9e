package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

func routingTestDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestRunAffinity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, k := range [][2]string{{"code", "p/a"}, {"chat", "p/a"}, {"chat", "p/b"}} {
		db.UpdateAffinity(ctx, k[0], k[1], func(a core.Affinity) core.Affinity {
			a.Pos, a.Neg, a.Positives, a.Negatives, a.UpdatedAt, a.LastSignal = 3, 1, 3, 1, at, at
			return a
		})
	}
	var out bytes.Buffer
	if err := runAffinity(ctx, db, 30, nil, at.Add(15*24*time.Hour), []string{"show"}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "code  p/a    0.75   2.0") || !strings.Contains(s, "2026-03-01 12:00") {
		t.Fatalf("show:\n%s", s)
	}
	out.Reset()
	if err := runAffinity(ctx, db, 30, nil, at, []string{"show", "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 3 || rows[0]["score"] != 0.75 || rows[0]["positive"] != 3.0 {
		t.Fatalf("json: %v %s", err, out.String())
	}
	out.Reset()
	if err := runAffinity(ctx, db, 30, nil, at, []string{"reset", "--task", "chat"}, &out); err != nil || !strings.Contains(out.String(), "Reset 2") {
		t.Fatalf("reset: %v %q", err, out.String())
	}
	// Names nothing knows are refused, naming what is known; nothing is
	// reset.
	catalog := map[string]string{"p/a": "p/a", "a": "p/a", "p/b": "p/b"}
	for _, bad := range [][]string{{"--task", "nope"}, {"--model", "nope"}} {
		err := runAffinity(ctx, db, 30, catalog, at, append([]string{"reset"}, bad...), &out)
		if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), map[string]string{"--task": "chat", "--model": "p/a"}[bad[0]]) {
			t.Fatalf("reset %v: %v; want an error naming it and the known names", bad, err)
		}
	}
	if rows, _ := db.Affinities(ctx); len(rows) != 1 {
		t.Fatalf("a refused reset changed the rows: %v", rows)
	}
	// An alias of models.catalog names its model.
	if err := runAffinity(ctx, db, 30, catalog, at, []string{"reset", "--model", "a"}, &out); err != nil {
		t.Fatal(err)
	}
	if rows, _ := db.Affinities(ctx); len(rows) != 0 {
		t.Fatalf("left: %v", rows)
	}
	var ue usageError
	if err := runAffinity(ctx, db, 30, nil, at, []string{"frobnicate"}, &out); !errors.As(err, &ue) || !strings.Contains(err.Error(), "affinity show") {
		t.Fatalf("bad subcommand: %v", err)
	}
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, u := range []core.UsageRecord{
		{At: now.Add(-time.Hour), Conversation: "telegram:1", UserID: "alice", Model: "p/a", InputTokens: 100, OutputTokens: 10, CostUSD: 0.25},
		{At: now.Add(-2 * time.Hour), Conversation: "telegram:2", UserID: "bob", Model: "p/b", InputTokens: 50, OutputTokens: 5, CostUSD: 0.5},
		{At: now.Add(-72 * time.Hour), Conversation: "telegram:1", UserID: "alice", Model: "p/a", CostUSD: 9},
	} {
		if err := db.AddUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := runUsage(ctx, db, now, []string{"--by", "user"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "bob") || !strings.Contains(s, "0.7500") || strings.Contains(s, "9.") {
		t.Fatalf("usage by user:\n%s", s)
	}
	out.Reset()
	if err := runUsage(ctx, db, now, []string{"--json", "--since", "168h"}, &out); err != nil {
		t.Fatal(err)
	}
	var res struct {
		By   string
		Rows []struct {
			Key     string
			CostUSD float64 `json:"cost_usd"`
			Calls   int
		}
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.By != "model" || len(res.Rows) != 2 || res.Rows[0].Key != "p/a" || res.Rows[0].CostUSD != 9.25 || res.Rows[0].Calls != 2 {
		t.Fatalf("json: %v %s", err, out.String())
	}
	// Days, as the status page counts them, are the same span.
	days := new(bytes.Buffer)
	if err := runUsage(ctx, db, now, []string{"--json", "--since", "7d"}, days); err != nil || days.String() != out.String() {
		t.Fatalf("--since 7d: %v\n%s\nwant as 168h:\n%s", err, days, out.String())
	}
	var ue usageError
	if err := runUsage(ctx, db, now, []string{"--by", "color"}, &out); !errors.As(err, &ue) {
		t.Fatalf("bad --by: %v", err)
	}
	for _, bad := range []string{"0d", "-2h", "week", "7days"} {
		if err := runUsage(ctx, db, now, []string{"--since", bad}, &out); !errors.As(err, &ue) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "7d") {
			t.Errorf("--since %s: %v; want a usage error naming it and the forms", bad, err)
		}
	}
}
