package main

import (
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
)

func TestGuardrails(t *testing.T) {
	c := plugintest.Start(t, plugintest.Build(t, "."), plugintest.Options{})
	in := core.HookInput{Text: "mail ada@example.com, card 4111 1111 1111 1111, thanks"}
	r, err := c.PreHook(in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != "mail [email], card [card number], thanks" || r.Metadata["redacted"] != "2" {
		t.Fatalf("pre = %+v", r)
	}
	if r, _ := c.PreHook(core.HookInput{Text: "nothing to hide"}); r.Text != "nothing to hide" || r.Metadata != nil {
		t.Fatalf("clean message = %+v; want it unchanged", r)
	}
	if r, _ := c.PreHook(core.HookInput{Text: " PING "}); r.Reply != "pong" {
		t.Fatalf("ping = %+v", r)
	}
	out, err := c.PostHook(core.HookInput{}, "The usual dosage is 200 mg.")
	if err != nil || !strings.HasSuffix(out, "not medical or legal advice._") {
		t.Fatalf("post = %q %v", out, err)
	}
	if out, _ := c.PostHook(core.HookInput{}, "Paris."); out != "Paris." {
		t.Fatalf("post of a plain answer = %q", out)
	}
}
