// Command opentalon is the OpenTalon gateway: it puts an LLM assistant
// into Slack, Discord, Telegram and the console. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// One P from the start of initialization (see its doc).
	_ "github.com/opentalon/opentalon/cmd/opentalon/oneproc"
)

func main() {
	stdio := Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	if code, ok := helperMain(os.Args[1:], stdio); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal a second one kills the process at once.
	go func() { <-ctx.Done(); stop() }()
	os.Exit(Main(ctx, os.Args[1:], stdio, os.LookupEnv))
}
