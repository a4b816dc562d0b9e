// Command opentalon is the OpenTalon gateway: it puts an LLM assistant
// into Slack, Discord, Telegram and the console. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal a second one kills the process at once.
	go func() { <-ctx.Done(); stop() }()
	os.Exit(Main(ctx, os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.LookupEnv))
}
