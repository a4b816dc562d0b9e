package lua

import (
	"context"
	"sync"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// What one conversation's run leaves in globals, library tables or
// top-level locals never reaches the next conversation's run.
func TestNoLeakBetweenConversations(t *testing.T) {
	te := startEngine(t, map[string]string{"leaky.lua": `
local runs = 0
count = (count or 0) + 1
function pre_hook(ctx)
  runs = runs + 1
  first = first or ctx.message
  ctx.metadata.first = first
  ctx.metadata.count = tostring(count)
  ctx.metadata.runs = tostring(runs)
  ctx.metadata.parked = tostring(string[1])
  return ctx
end`,
		"parker.lua": `function pre_hook(ctx)
  local before = tostring(string[1])
  table.insert(string, ctx.message)
  ctx.metadata.before = before
  return ctx
end`}, func(o *Options) { o.PoolSize = 1 })
	a := input("secret of A")
	a.In.Conversation.Chat = "A"
	resA, err := te.Pre(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if resA.Metadata["first"] != "secret of A" {
		t.Fatalf("A = %v", resA.Metadata)
	}
	made := te.states.Load()
	for i := range 5 {
		b := input("hello from B")
		b.In.Conversation.Chat = "B"
		res, err := te.Pre(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"first": "hello from B", "count": "1", "runs": "1", "parked": "nil", "before": "nil"}
		for k, v := range want {
			if res.Metadata[k] != v {
				t.Fatalf("run %d of B: metadata[%s] = %q, want %q (all: %v)", i, k, res.Metadata[k], v, res.Metadata)
			}
		}
	}
	// leaky.lua's runs were clean: its state was pooled, not remade.
	// parker.lua wrote into a library table, so its state was dropped
	// after each run: five new states.
	if got := te.states.Load() - made; got != 5 {
		t.Fatalf("%d states made for 10 runs, want 5 (only the dirty runs' states are replaced)", got)
	}
}

// Concurrent runs of one script use separate states.
func TestConcurrentRuns(t *testing.T) {
	te := startEngine(t, map[string]string{"tag.lua": `
function pre_hook(ctx)
  mine = ctx.message
  for i = 1, 2000 do local _ = i * 2 end
  ctx.metadata.mine = mine
  return ctx
end`}, nil)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := string(rune('a'+i%26)) + string(rune('0'+i/26))
			res, err := te.Pre(context.Background(), core.HookInput{Text: msg})
			if err != nil || res.Metadata["mine"] != msg {
				errs <- msg + " got " + res.Metadata["mine"]
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
