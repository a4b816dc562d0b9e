package gateway_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
)

// stepSource is a HookSource of fixed steps.
type stepSource []core.HookStep

func (s stepSource) HookSteps() []core.HookStep { return s }

// tracer records which steps ran, in order.
type tracer struct {
	mu  sync.Mutex
	ran []string
}

func (tr *tracer) step(name string, order int, pre func(string) (core.PreResult, error), post func(string) (string, error)) core.HookStep {
	st := core.HookStep{Name: name, Order: order}
	if pre != nil {
		st.Pre = func(_ context.Context, in core.HookInput) (core.PreResult, error) {
			tr.mu.Lock()
			tr.ran = append(tr.ran, "pre:"+name)
			tr.mu.Unlock()
			return pre(in.Text)
		}
	}
	if post != nil {
		st.Post = func(_ context.Context, _ core.HookInput, answer string) (core.PostResult, error) {
			tr.mu.Lock()
			tr.ran = append(tr.ran, "post:"+name)
			tr.mu.Unlock()
			text, err := post(answer)
			return core.PostResult{Text: text}, err
		}
	}
	return st
}

func appendPre(tag string) func(string) (core.PreResult, error) {
	return func(t string) (core.PreResult, error) { return core.PreResult{Text: t + tag}, nil }
}

func appendPost(tag string) func(string) (string, error) {
	return func(a string) (string, error) { return a + tag, nil }
}

func TestOrderedHooksInterleaveByOrder(t *testing.T) {
	tr := &tracer{}
	lua := stepSource{tr.step("lua:a", 0, appendPre("+a"), appendPost("+a")), tr.step("lua:c", 20, appendPre("+c"), nil)}
	grpc := stepSource{tr.step("plugin:b", 10, appendPre("+b"), appendPost("+b")), tr.step("plugin:z", 20, appendPre("+z"), nil)}
	h := gateway.NewOrderedHooks(nil, lua, nil, grpc)
	pre, err := h.Pre(context.Background(), core.HookInput{Text: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if pre.Text != "m+a+b+c+z" {
		t.Fatalf("pre text = %q; want each step in order, lua before plugin at equal order", pre.Text)
	}
	out, err := h.Post(context.Background(), core.HookInput{Text: pre.Text}, "ans")
	if err != nil || out != "ans+a+b" {
		t.Fatalf("post = %q %v; want ans+a+b", out, err)
	}
	want := "pre:lua:a pre:plugin:b pre:lua:c pre:plugin:z post:lua:a post:plugin:b"
	if got := strings.Join(tr.ran, " "); got != want {
		t.Fatalf("ran %s; want %s", got, want)
	}
}

func TestOrderedHooksSkipFailuresAndStopOnDrop(t *testing.T) {
	tr := &tracer{}
	failing := func(string) (core.PreResult, error) { return core.PreResult{}, errors.New("hook crashed") }
	dropping := func(string) (core.PreResult, error) {
		return core.PreResult{Drop: true, Reason: "policy", Reply: "no"}, nil
	}
	h := gateway.NewOrderedHooks(nil, stepSource{
		tr.step("a", 1, failing, func(string) (string, error) { return "", errors.New("post crashed") }),
		tr.step("b", 2, appendPre("+b"), appendPost("+b")),
		tr.step("c", 3, dropping, nil),
		tr.step("d", 4, appendPre("+d"), nil),
	})
	pre, err := h.Pre(context.Background(), core.HookInput{Text: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if !pre.Drop || pre.Reply != "no" || pre.Reason != "policy" {
		t.Fatalf("pre = %+v; want the drop of step c", pre)
	}
	if got := strings.Join(tr.ran, " "); got != "pre:a pre:b pre:c" {
		t.Fatalf("ran %s; want a (failed, skipped), b, c (dropped) and not d", got)
	}
	out, err := h.Post(context.Background(), core.HookInput{}, "ans")
	if err != nil || out != "ans+b" {
		t.Fatalf("post = %q %v; want the failing post skipped and b applied", out, err)
	}
}

// TestPostHookOfOnlyWhitespaceLeavesTheAnswer: a post step that returns
// only spaces and line breaks would have the answer sent as nothing;
// the answer goes on as the step before left it.
func TestPostHookOfOnlyWhitespaceLeavesTheAnswer(t *testing.T) {
	tr := &tracer{}
	blank := func(string) (string, error) { return " \n\t ", nil }
	h := gateway.NewOrderedHooks(nil, stepSource{
		tr.step("a", 1, nil, appendPost("+a")),
		tr.step("blank", 2, nil, blank),
	})
	out, err := h.Post(context.Background(), core.HookInput{}, "ans")
	if err != nil || out != "ans+a" {
		t.Fatalf("post = %q %v; want ans+a (the blank step's text ignored)", out, err)
	}
}

func TestOrderedHooksStopWhenTheRequestEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &tracer{}
	h := gateway.NewOrderedHooks(nil, stepSource{
		tr.step("a", 1, func(string) (core.PreResult, error) { cancel(); return core.PreResult{}, context.Canceled }, nil),
		tr.step("b", 2, appendPre("+b"), nil),
	})
	if _, err := h.Pre(ctx, core.HookInput{Text: "m"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want the request's end", err)
	}
	if len(tr.ran) != 1 {
		t.Fatalf("ran %v; want nothing after the request ended", tr.ran)
	}
}

func TestHooksAtRunsAPlainHooksAsOneStep(t *testing.T) {
	tr := &tracer{}
	h := gateway.NewOrderedHooks(nil, gateway.HooksAt("test", gateway.LastOrder, &tagHooks{}), stepSource{tr.step("p", 5, appendPre(" colour"), nil)})
	pre, _ := h.Pre(context.Background(), core.HookInput{Text: "m"})
	if pre.Text != "m color" || pre.Metadata["lang"] != "en" {
		t.Fatalf("pre = %+v; want the plugin step first, then the plain hooks (colour→color, lang)", pre)
	}
}

func TestOrderedHooksStreamSafe(t *testing.T) {
	post := func(_ context.Context, _ core.HookInput, a string) (core.PostResult, error) {
		return core.PostResult{Text: a}, nil
	}
	pre := func(_ context.Context, in core.HookInput) (core.PreResult, error) {
		return core.PreResult{Text: in.Text}, nil
	}
	tests := []struct {
		name  string
		steps stepSource
		want  bool
	}{
		{"no steps", nil, true},
		{"safe post", stepSource{{Name: "a", Post: post}}, true},
		{"unsafe post", stepSource{{Name: "a", Post: post}, {Name: "b", Order: 5, Post: post, StreamUnsafe: true}}, false},
		{"unsafe mark on a pre-only step", stepSource{{Name: "a", Pre: pre, StreamUnsafe: true}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := gateway.NewOrderedHooks(nil, stepSource{{Name: "x", Order: 1, Post: post}}, tt.steps)
			if got := h.StreamSafe(core.HookInput{}); got != tt.want {
				t.Fatalf("StreamSafe = %v; want %v", got, tt.want)
			}
		})
	}
}

// plainHooks is a plain core.Hooks that fails on a text with "fail" in
// it and whose stream safety is fixed.
type plainHooks struct{ safe bool }

func (plainHooks) Pre(_ context.Context, in core.HookInput) (core.PreResult, error) {
	if strings.Contains(in.Text, "fail") {
		return core.PreResult{}, errors.New("pre broke")
	}
	return core.PreResult{Text: in.Text + "+plain", Metadata: in.Metadata}, nil
}

func (plainHooks) Post(_ context.Context, _ core.HookInput, answer string) (string, error) {
	if strings.Contains(answer, "fail") {
		return "", errors.New("post broke")
	}
	return answer + "+plain", nil
}

func (h plainHooks) StreamSafe(core.HookInput) bool { return h.safe }

// TestHooksAtErrorsFailTheRequest: a plain Hooks run through HooksAt
// keeps what it does alone: its error ends the chain and is returned
// (the request fails), where a failing step is skipped; and its stream
// safety counts.
func TestHooksAtErrorsFailTheRequest(t *testing.T) {
	tr := &tracer{}
	h := gateway.NewOrderedHooks(nil, gateway.HooksAt("app", 5, plainHooks{safe: true}),
		stepSource{tr.step("before", 1, appendPre("+b"), appendPost("+b")), tr.step("after", 10, appendPre("+a"), appendPost("+a"))})
	if pre, err := h.Pre(context.Background(), core.HookInput{Text: "m"}); err != nil || pre.Text != "m+b+plain+a" {
		t.Fatalf("pre = %+v, %v; want every step applied in order", pre, err)
	}
	if out, err := h.Post(context.Background(), core.HookInput{}, "x"); err != nil || out != "x+b+plain+a" {
		t.Fatalf("post = %q, %v; want every step applied in order", out, err)
	}
	tr.ran = nil
	if _, err := h.Pre(context.Background(), core.HookInput{Text: "fail"}); err == nil || err.Error() != "pre broke" {
		t.Fatalf("pre err = %v; want the plain hook's error returned", err)
	}
	if _, err := h.Post(context.Background(), core.HookInput{}, "fail"); err == nil || err.Error() != "post broke" {
		t.Fatalf("post err = %v; want the plain hook's error returned", err)
	}
	if strings.Join(tr.ran, ",") != "pre:before,post:before" {
		t.Fatalf("ran %v; want nothing after the failed plain hook", tr.ran)
	}
	if !h.StreamSafe(core.HookInput{}) {
		t.Fatal("StreamSafe = false; the plain hooks say safe")
	}
	if gateway.NewOrderedHooks(nil, gateway.HooksAt("app", gateway.LastOrder, plainHooks{safe: false})).StreamSafe(core.HookInput{}) {
		t.Fatal("StreamSafe = true; the plain hooks say unsafe")
	}
}
