package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// BenchmarkHookOverhead is BenchmarkGatewayOverhead with and without one
// gRPC hook plugin (a pre hook and a post hook, testdata/extplugin) on
// the message's path: the difference of the p50/p99 is what the hook
// adds to a message through the whole gateway.
//
// Run: go test -run '^$' -bench HookOverhead -benchtime 300x ./cmd/opentalon
func BenchmarkHookOverhead(b *testing.B) {
	for _, withHook := range []bool{false, true} {
		name := "none"
		if withHook {
			name = "grpc-hook"
		}
		b.Run(name, func(b *testing.B) {
			fake := providertest.NewOpenAI(b)
			var mu sync.Mutex
			arrived := map[string]time.Time{}
			fake.SetReply(func(r providertest.Received) providertest.Script {
				mu.Lock()
				arrived[r.LastUser()] = time.Now()
				mu.Unlock()
				return providertest.Echo(r)
			})
			extra, suffix := "", ""
			if withHook {
				dir := plugintest.Dir(b)
				installExt(b, dir, "hook", map[string]any{"pre_order": 10, "post_order": 10, "post_suffix": " ✓"})
				extra, suffix = "plugins:\n  tools:\n    plugin_dir: "+dir+"\n", " ✓"
			}
			h := startApp(b, parseConfig(b, testConfig(b.TempDir(), fake.BaseURL(), extra)))
			if withHook {
				waitPlugins(b, h.app, "hook")
			}
			h.send("warm up")
			h.expect("echo: warm up" + suffix)
			pre := make([]time.Duration, 0, b.N)
			total := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				if i%50 == 49 {
					b.StopTimer()
					h.send("/new")
					h.next()
					b.StartTimer()
				}
				msg := fmt.Sprintf("message %d", i)
				start := time.Now()
				h.send(msg)
				h.expect("echo: " + msg + suffix)
				total = append(total, time.Since(start))
				mu.Lock()
				pre = append(pre, arrived[msg].Sub(start))
				mu.Unlock()
			}
			b.StopTimer()
			report(b, "pre-llm", pre)
			report(b, "reply", total)
		})
	}
}
