package routing

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestSemaphoresUnder50Conversations runs 50 concurrent conversations
// against a cloud and a local fake LLM server and counts the requests in
// flight at each server.
func TestSemaphoresUnder50Conversations(t *testing.T) {
	cloud, local := providertest.NewOpenAI(t), providertest.NewOpenAI(t)
	cloud.Hold()
	local.Hold()
	r, err := New(Options{
		Providers: map[string]provider.Provider{
			"cloud": provider.NewOpenAI(provider.Options{ID: "cloud", BaseURL: cloud.BaseURL()}),
			"local": provider.NewOpenAI(provider.Options{ID: "local", BaseURL: local.BaseURL()}),
		},
		Catalog:  []Model{{Ref: "cloud/m", Weight: 50}, {Ref: "local/m", Weight: 40, Local: true}},
		MaxCloud: 4, MaxLocal: 1,
		Store: NewMemStore(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := "cloud/m"
			if i%5 == 0 {
				model = "local/m"
			}
			conv := core.ConversationKey{Channel: "console", Chat: fmt.Sprint(i)}
			_, err := r.Chat(context.Background(), Call{Purpose: "chat", Conversation: conv, Model: model, Req: userMsg("hello")})
			errs <- err
		}()
	}
	// Both semaphores fill up while the servers hold every request.
	if err := cloud.WaitRequests(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if err := local.WaitRequests(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cloud.Release()
	local.Release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := cloud.MaxInFlight(); got != 4 {
		t.Errorf("cloud max in flight = %d, want 4", got)
	}
	if got := local.MaxInFlight(); got != 1 {
		t.Errorf("local max in flight = %d, want 1", got)
	}
	if cloud.Count() != 40 || local.Count() != 10 {
		t.Errorf("requests cloud=%d local=%d", cloud.Count(), local.Count())
	}
}
