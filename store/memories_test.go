package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func saveMem(t *testing.T, db *DB, m core.Memory) int64 {
	t.Helper()
	id, err := db.SaveMemory(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func ids(ms []core.Memory) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(m.ID)
	}
	return s
}

func TestMemorySearchRanking(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	const ann = "telegram:1"
	deploy := saveMem(t, db, core.Memory{Owner: ann, Content: "Deploys go to the staging cluster first, then production", Tags: []string{"fact"}})
	both := saveMem(t, db, core.Memory{Owner: ann, Content: "The production cluster runs Kubernetes 1.31; production deploys need approval", Tags: []string{"fact"}})
	coffee := saveMem(t, db, core.Memory{Owner: ann, Content: "Prefers espresso over filter coffee", Tags: []string{"preference"}})
	stem := saveMem(t, db, core.Memory{Owner: ann, Content: "Was analyzing the billing reports last week"})

	tests := []struct {
		name, text, want string
	}{
		{"more shared words rank first", "which production cluster needs approval", fmt.Sprint(both, ",", deploy)},
		{"more shared words rank first, the other way", "do deploys go to staging", fmt.Sprint(deploy, ",", both)},
		{"a rare word beats a common one", "espresso production", fmt.Sprint(coffee, ",", both, ",", deploy)},
		{"the stemmer matches word forms", "analyze billing", fmt.Sprint(stem)},
		{"tags are searched too", "preference", fmt.Sprint(coffee)},
		{"stop words alone match nothing", "what is the", ""},
		{"punctuation and quotes are not FTS syntax", `coffee" OR x:* (`, fmt.Sprint(coffee)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := db.Memories(ctx, core.MemoryQuery{Owner: ann, Text: tc.text})
			if err != nil {
				t.Fatal(err)
			}
			if ids(got) != tc.want {
				t.Fatalf("search %q = [%s] %v; want [%s]", tc.text, ids(got), got, tc.want)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Rank < got[i-1].Rank {
					t.Fatalf("results not ordered by rank: %v", got)
				}
			}
		})
	}
}

func TestMemoriesAreScopedPerUser(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	ann, bob := "telegram:1", "telegram:2"
	annFact := saveMem(t, db, core.Memory{Owner: ann, Content: "Ann's cat is called Miso", Tags: []string{"fact"}})
	bobFact := saveMem(t, db, core.Memory{Owner: bob, Content: "Bob's cat is called Pixel", Tags: []string{"fact"}})
	shared := saveMem(t, db, core.Memory{Owner: "console:local", Shared: true, Content: "The office cat is called Tiger"})

	for _, tc := range []struct {
		owner, want string
	}{
		{ann, fmt.Sprint(shared, ",", annFact)},
		{bob, fmt.Sprint(shared, ",", bobFact)},
	} {
		got, err := db.Memories(ctx, core.MemoryQuery{Owner: tc.owner, WithShared: true})
		if err != nil || ids(got) != tc.want {
			t.Fatalf("list of %s = [%s] %v; want [%s]", tc.owner, ids(got), err, tc.want)
		}
		found, _ := db.Memories(ctx, core.MemoryQuery{Owner: tc.owner, WithShared: true, Text: "cat called"})
		for _, m := range found {
			if m.Owner != tc.owner && !m.Shared {
				t.Fatalf("search for %s found %s's memory %v", tc.owner, m.Owner, m)
			}
		}
		if len(found) != 2 {
			t.Fatalf("search for %s = %v; want its own and the shared one", tc.owner, found)
		}
	}
	// Bob cannot delete Ann's memory, nor the shared one unless admin.
	if ok, _ := db.DeleteMemory(ctx, annFact, bob, false); ok {
		t.Fatal("bob deleted ann's memory")
	}
	if ok, _ := db.DeleteMemory(ctx, shared, bob, false); ok {
		t.Fatal("a non-admin deleted a shared memory")
	}
	if n, _ := db.DeleteMemories(ctx, bob); n != 1 {
		t.Fatalf("forget all of bob deleted %d; want only bob's one", n)
	}
	if got, _ := db.Memories(ctx, core.MemoryQuery{}); ids(got) != fmt.Sprint(shared, ",", annFact) {
		t.Fatalf("after bob forgot everything: [%s]", ids(got))
	}
	if ok, _ := db.DeleteMemory(ctx, shared, bob, true); !ok {
		t.Fatal("an admin could not delete a shared memory")
	}
	// Ids are never reused.
	next := saveMem(t, db, core.Memory{Owner: bob, Content: "new"})
	if next <= shared {
		t.Fatalf("new id %d reuses a deleted one (last %d)", next, shared)
	}
}

func TestWorkflowOutcomeFollowsSignals(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_000_000, 0)}
	db := openTest(t, Options{Now: clk.Now})
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	s, _ := db.ActiveSession(ctx, conv)
	steps := []core.WorkflowStep{{Plugin: "gitlab", Action: "analyze_code", Order: 1}, {Plugin: "jira", Action: "create_issue", Order: 2}}
	wf, err := db.SaveWorkflow(ctx, core.Memory{Owner: "telegram:1", Content: "analyze the code and file an issue", Steps: steps, TaskType: "code", RequestID: 41})
	if err != nil {
		t.Fatal(err)
	}
	reply := addTurn(t, db, s, 41, "analyze the code and file an issue", "done")
	other := addTurn(t, db, s, 42, "thanks", "you're welcome")
	outcome := func() string {
		m, err := db.Memory(ctx, wf)
		if err != nil || m == nil {
			t.Fatalf("workflow %d: %v", wf, err)
		}
		return m.Outcome
	}
	if got := outcome(); got != core.WorkflowSucceeded {
		t.Fatalf("new workflow outcome %q", got)
	}
	// A signal on another reply does not touch it; an implicit acceptance
	// neither.
	db.AddSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: core.Negative, ReplyID: other.ID, At: clk.Now()})
	db.AddSignal(ctx, core.Signal{Kind: "accepted", Polarity: core.Positive, ReplyID: reply.ID, At: clk.Now()})
	if got := outcome(); got != core.WorkflowSucceeded {
		t.Fatalf("outcome after unrelated signals %q", got)
	}
	for _, tc := range []struct {
		kind core.SignalKind
		pol  core.Polarity
		want string
	}{
		{core.SignalFollowUp, core.Negative, core.WorkflowFailed},    // "no, try again"
		{core.SignalReaction, core.Positive, core.WorkflowSucceeded}, // the 👎 taken back
		{core.SignalReaction, core.Negative, core.WorkflowFailed},    // 👎
		{"accepted", core.Positive, core.WorkflowFailed},             // moving on does not undo a rejection
	} {
		if _, err := db.AddSignal(ctx, core.Signal{Kind: tc.kind, Polarity: tc.pol, ReplyID: reply.ID, At: clk.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := outcome(); got != tc.want {
			t.Fatalf("after a %s %s signal: outcome %q, want %q", tc.pol, tc.kind, got, tc.want)
		}
	}
	// Only successful workflows are found for recall.
	if got, _ := db.Memories(ctx, core.MemoryQuery{Owner: "telegram:1", Tag: core.TagWorkflow, Outcome: core.WorkflowSucceeded, Text: "analyze code"}); len(got) != 0 {
		t.Fatalf("failed workflow recalled: %v", got)
	}
	// The same plan for the same request again refreshes it as a success.
	again, err := db.SaveWorkflow(ctx, core.Memory{Owner: "telegram:1", Content: "analyze the code and file an issue", Steps: steps, RequestID: 43})
	if err != nil || again != wf || outcome() != core.WorkflowSucceeded {
		t.Fatalf("same workflow again: id %d (first %d), outcome %q, %v", again, wf, outcome(), err)
	}
	got, _ := db.Memories(ctx, core.MemoryQuery{Owner: "telegram:1", Tag: core.TagWorkflow})
	if len(got) != 1 || len(got[0].Steps) != 2 || got[0].Steps[1].Action != "create_issue" || !got[0].HasTag(core.TagWorkflow) {
		t.Fatalf("workflows = %+v", got)
	}
}

func TestWorkflowRankBoostsSameTaskType(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	owner := "telegram:1"
	st := []core.WorkflowStep{{Plugin: "a", Action: "x", Order: 1}, {Plugin: "b", Action: "y", Order: 2}}
	chat, _ := db.SaveWorkflow(ctx, core.Memory{Owner: owner, Content: "weekly report for the team", Steps: st, TaskType: "chat"})
	code, _ := db.SaveWorkflow(ctx, core.Memory{Owner: owner, Content: "weekly report for the team please", Steps: st, TaskType: "code"})
	for task, first := range map[string]int64{"chat": chat, "code": code} {
		got, err := db.Memories(ctx, core.MemoryQuery{Owner: owner, Tag: core.TagWorkflow, Text: "weekly report", TaskType: task})
		if err != nil || len(got) != 2 || got[0].ID != first {
			t.Fatalf("task %s: [%s] %v; want %d first", task, ids(got), err, first)
		}
	}
}

func TestMatchQuery(t *testing.T) {
	for in, want := range map[string]string{
		"What's my name?":        `"name"`,
		`deploy "prod" NOT x*`:   `"deploy" OR "prod" OR "not"`,
		"Übersetze das Dokument": `"übersetze" OR "das" OR "dokument"`,
		"a I":                    ``,
	} {
		if got := MatchQuery(in); got != want {
			t.Errorf("MatchQuery(%q) = %s, want %s", in, got, want)
		}
	}
}
