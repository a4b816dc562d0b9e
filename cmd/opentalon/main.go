// Command opentalon is the OpenTalon gateway: it puts an LLM assistant
// into Slack, Discord, Telegram and the console. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

func main() {
	stdio := Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	if code, ok := helperMain(os.Args[1:], stdio); ok {
		os.Exit(code)
	}
	// The gateway waits on the network nearly all the time. With one P the
	// scheduler stops waking spinning threads at every hand-off between
	// goroutines, which was a fifth of the CPU spent per message (see
	// BenchmarkPerfBeforeLLM); burst throughput did not drop, since the
	// one SQLite writer serializes the work anyway. GOMAXPROCS in the
	// environment still decides.
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal a second one kills the process at once.
	go func() { <-ctx.Done(); stop() }()
	os.Exit(Main(ctx, os.Args[1:], stdio, os.LookupEnv))
}
