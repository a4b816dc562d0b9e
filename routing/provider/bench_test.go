package provider

import (
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// benchRequest is a small realistic turn: a system prompt, some history
// and one tool on offer.
func benchRequest() *Request {
	return &Request{
		Model:  "m",
		System: "You are a helpful assistant. Answer briefly.",
		Messages: []core.ChatMessage{
			{Role: core.RoleUser, Content: "What is the capital of France?"},
			{Role: core.RoleAssistant, Content: "Paris."},
			{Role: core.RoleUser, Content: "And of Italy? Answer in one word please."},
		},
		Tools: []core.ToolSpec{{Plugin: "web", Action: "search", Description: "search the web",
			Params: []core.ToolParam{{Name: "q", Required: true}}}},
	}
}

func benchProviders(b *testing.B, fn func(b *testing.B, p Provider)) {
	for _, f := range flavors() {
		b.Run(f.name, func(b *testing.B) {
			s := f.fake(b)
			s.SetReply(func(providertest.Received) providertest.Script {
				return providertest.Script{Text: "Rome is the capital of Italy."}
			})
			fn(b, f.prov(Options{BaseURL: s.BaseURL()}))
		})
	}
}

// BenchmarkComplete measures one Complete round trip against the fake on
// loopback: encode, HTTP, the fake's decode and answer, and our decode.
func BenchmarkComplete(b *testing.B) {
	benchProviders(b, func(b *testing.B, p Provider) {
		req, cred := benchRequest(), Credentials{APIKey: testKey}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Complete(context.Background(), cred, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStream is the same round trip with SSE streaming.
func BenchmarkStream(b *testing.B) {
	benchProviders(b, func(b *testing.B, p Provider) {
		req, cred := benchRequest(), Credentials{APIKey: testKey}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Stream(context.Background(), cred, req, func(string) {}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
