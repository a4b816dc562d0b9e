package routing_test

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/console"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

// historyAgent is a minimal agent: history + the message, routed.
type historyAgent struct {
	r  *routing.Router
	db *store.DB
}

func (a historyAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	hist, err := a.db.History(ctx, t.Session.ID, 50)
	if err != nil {
		return core.Answer{}, err
	}
	var msgs []core.ChatMessage
	if !t.Retry {
		msgs = append(msgs, core.ChatMessage{Role: core.RoleUser, Content: t.Text})
	}
	s := t.Session
	res, err := a.r.Chat(ctx, routing.Call{Purpose: "chat", Session: &s, UserID: t.In.UserID, Model: t.Model, Exclude: t.Exclude,
		Req: provider.Request{Messages: append(hist, msgs...)}})
	if err != nil {
		return core.Answer{}, err
	}
	msgs = append(msgs, core.ChatMessage{Role: core.RoleAssistant, Content: res.Text})
	return core.Answer{Text: res.Text, Messages: msgs, Model: res.Model, TaskType: res.TaskType, Reason: res.Reason, Usage: res.Usage}, nil
}

// TestModelCommandsThroughConsole drives /model, /models, /retry and a
// reject follow-up through the console channel, the gateway, the store
// and a fake OpenAI-compatible server.
func TestModelCommandsThroughConsole(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := providertest.NewOpenAI(t)
	srv.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Text: "answer from " + r.Model}
	})
	db, err := store.Open(ctx, t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := routing.New(routing.Options{
		Providers: map[string]provider.Provider{"fake": provider.NewOpenAI(provider.Options{ID: "fake", BaseURL: srv.BaseURL()})},
		Catalog: []routing.Model{
			{Ref: "fake/small", Alias: "small", Weight: 80, CostIn: 0.5, CostOut: 1},
			{Ref: "fake/big", Alias: "big", Weight: 20, CostIn: 5, CostOut: 10},
		},
		Profiles: map[string][]routing.Profile{"fake": {{ID: "fake:default", Provider: "fake", Key: "k"}}},
		Store:    db,
		// Learning stays on record but off for choosing, so the unpinned
		// answers are deterministic (highest weight).
		NoAffinity: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	agent := historyAgent{r: r, db: db}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	g := gateway.New(gateway.Options{Store: db, Agent: agent, Signals: r, Workers: 1})
	g.AddChannel(console.New(console.Options{In: inR, Out: outW}))
	for _, c := range r.Commands(db, db) {
		g.AddCommand(c)
	}
	g.AddInterceptor(routing.NewEscalator(r, db, nil))
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, 5*time.Second) }()
	lines := bufio.NewScanner(outR)
	// say sends one line and returns the reply (until an empty read).
	say := func(text string, wantLines int) string {
		t.Helper()
		if _, err := io.WriteString(inW, text+"\n"); err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) < wantLines && lines.Scan() {
			got = append(got, lines.Text())
		}
		return strings.Join(got, "\n")
	}
	steps := []struct {
		send  string
		lines int
		want  []string
	}{
		{"hello there", 1, []string{"answer from small"}},
		{"/model", 3, []string{"Model: fake/small", "Auth profile: automatic rotation"}},
		{"/model bgi", 1, []string{`Unknown model "bgi"`, "big (fake/big)"}},
		{"/model big", 1, []string{"Pinned fake/big"}},
		{"/model", 3, []string{"Model: fake/big (pinned"}},
		{"what time is it in Tokyo?", 1, []string{"answer from big"}},
		{"/retry", 3, []string{"Answered again by your pinned model fake/big", "answer from big"}},
		{"/model @fake:default", 1, []string{"Pinned auth profile fake:default"}},
		{"/models", 4, []string{"fake/small (small) — weight 80", "▶ fake/big (big) — weight 20"}},
		{"/model auto", 1, []string{"Unpinned", "fake/small"}},
		{"tell me a joke", 1, []string{"answer from small"}},
		{"no, try again", 3, []string{"Answered again by fake/big (fake/small was rejected)", "answer from big"}},
	}
	for _, s := range steps {
		out := say(s.send, s.lines)
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Fatalf("%q answered %q; want %q", s.send, out, w)
			}
		}
	}
	// The pin lives on the session; the choice and the rejection were learned.
	sess, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "local"})
	if err != nil || sess.ModelPin != "" || sess.ProfilePin != "" {
		t.Fatalf("session pins = %q %q, %v", sess.ModelPin, sess.ProfilePin, err)
	}
	aff, err := db.Affinities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range aff {
		got = append(got, a.Task+"/"+a.Model)
	}
	if len(aff) < 2 {
		t.Fatalf("affinity rows = %v", got)
	}
	// The escalated question reached the server without the rejection text.
	last, _ := srv.Last()
	if last.LastUser() != "tell me a joke" {
		t.Fatalf("escalation asked %q", last.LastUser())
	}
	cancel()
	inW.Close()
	outW.Close()
	<-done
}
