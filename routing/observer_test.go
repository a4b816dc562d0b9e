package routing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

type recordingObserver struct {
	mu        sync.Mutex
	calls     []string
	failovers []string
}

func (o *recordingObserver) LLMCall(model, prov, outcome string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		outcome += " (negative duration)"
	}
	o.calls = append(o.calls, model+" "+prov+" "+outcome)
}

func (o *recordingObserver) Failover(from, to string) {
	o.mu.Lock()
	o.failovers = append(o.failovers, from+"→"+to)
	o.mu.Unlock()
}

func TestObserverSeesAttemptsAndFailovers(t *testing.T) {
	obs := &recordingObserver{}
	r, p, _, _, _ := newTestRouter(t, func(o *Options) {
		threeProfiles(o)
		o.Observer = obs
		o.Fallbacks = []string{"q/other"}
	})
	n := 0
	p.fn = func(cred provider.Credentials, req *provider.Request) (*provider.Response, error) {
		n++
		switch cred.APIKey {
		case "key-a":
			return nil, &core.Error{Kind: core.KindRateLimited, Msg: "429"}
		}
		return nil, &core.Error{Kind: core.KindUnavailable, Msg: "503"}
	}
	res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")})
	if err != nil || res.Model != "q/other" {
		t.Fatalf("got %v %v; want the fallback's answer", res.Model, err)
	}
	want := "[p/cheap p rate_limited p/cheap p unavailable q/other q ok]"
	if got := fmt.Sprint(obs.calls); got != want {
		t.Errorf("calls = %s\nwant   %s", got, want)
	}
	if got := fmt.Sprint(obs.failovers); got != "[p/cheap→p/cheap p/cheap→q/other]" {
		t.Errorf("failovers = %s", got)
	}
}
