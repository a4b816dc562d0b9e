#!/bin/sh
# bench.sh runs OpenTalon's benchmarks and prints their numbers.
#
#   scripts/bench.sh            # everything (about two minutes)
#   scripts/bench.sh perf       # only the binary's targets (cmd/opentalon Perf*)
#
# The Perf* benchmarks build the stripped binary as a release is built
# (go build -trimpath -tags grpcnotrace
# -ldflags "-s -w") and run it against fake Telegram and LLM servers; they
# need Linux (/proc). PerfEngines and the store's *Postgres benchmarks
# start a private PostgreSQL (store/pgtest; skipped without its binaries).
# Targets: start-ms <= 15, idle-MiB <= 20,
# cpu-before-llm-ms/msg <= 2, added-p50-ms <= 2, binary-MB <= 25.
# CGO_ENABLED=0 scripts/bench.sh builds a static binary (smaller RSS).
# OPENTALON_PERF_METRICS=on|off runs the binary's server with the metrics
# counted or not (unset: server off), to compare their cost per message.
set -eu
cd "$(dirname "$0")/.."

run() {
	# run PACKAGE PATTERN BENCHTIME
	go test -run '^$' -bench "$2" -benchtime "$3" "$1" 2>&1 | grep -E '^(Benchmark|FAIL|---|panic)' || true
}

echo "== binary (cmd/opentalon)"
run ./cmd/opentalon 'PerfBinarySize' 1x
run ./cmd/opentalon 'PerfStart' 20x
run ./cmd/opentalon 'PerfMessage$' 500x
run ./cmd/opentalon 'PerfBeforeLLM' 500x
run ./cmd/opentalon 'PerfBurst' 3x
echo "== the same binary on SQLite and on a local PostgreSQL (durable commits), one replica"
run ./cmd/opentalon 'PerfEngines' 300x
[ "${1:-}" = perf ] && exit 0

echo "== store queue (enqueue, claim, finish; SQLite, then a local PostgreSQL with durable commits)"
run ./store 'Queue' 2000x
run ./store 'ClaimHeads' 1s
echo "== providers (fake OpenAI on 127.0.0.1)"
run ./routing/provider '.' 1s
echo "== routing decision and classifier"
run ./routing 'RouteDecision|Classify' 1s
echo "== guard (64 KB plugin result)"
run ./guard 'Pipeline' 1s
echo "== plugins (Execute round trip over gRPC)"
run ./plugins 'ExecuteRoundTrip' 1s
echo "== plugin extension points (one gRPC hook per message; an HTTP route round trip)"
run ./plugins 'HookPerMessage|RouteRoundTrip' 1x
run ./cmd/opentalon 'HookOverhead' 300x
echo "== telegram inbound -> reply (channel + gateway + SQLite, instant agent)"
run ./channels/telegram 'InboundToReply$' 1x
run ./channels/telegram 'InboundToReplyIdle' 500x
echo "== discord MESSAGE_CREATE -> REST reply (gateway websocket + channel + gateway + SQLite, instant agent)"
run ./channels/discord 'MessageToReply' 1x
echo "== streaming: first visible text (50 tokens/s LLM), edits per minute on a 2,000-token answer per platform (about 3 minutes)"
run ./cmd/opentalon 'StreamFirstText' 5x
run ./cmd/opentalon 'StreamEditsPerMinute' 1x
echo "== text formatting"
run ./channels/textfmt 'Format' 1s
echo "== config"
run ./config '.' 1s
echo "== metrics: what they add to one message (observer calls)"
run ./metrics 'PerMessage' 200000x
echo "== status page first load (headless Chromium; skipped without it)"
run ./cmd/opentalon 'StatusPageFirstLoad' 20x
