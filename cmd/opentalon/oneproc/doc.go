// Package oneproc gives the opentalon binary one P (GOMAXPROCS 1) unless
// the environment sets GOMAXPROCS, from the start of its package
// initialization rather than from main.
//
// The gateway waits on the network nearly all the time. With one P the
// scheduler stops waking spinning threads at every hand-off between
// goroutines, which was a fifth of the CPU spent per message (see
// BenchmarkPerfBeforeLLM); burst throughput did not drop, since the one
// SQLite writer serializes the work anyway.
//
// Why not in main: lowering GOMAXPROCS there destroyed a P that had run
// much of the packages' initialization, and handing its cached spans
// back faulted in about a hundred pages (about 2.5 ms of every start on
// a virtual machine, BenchmarkPerfStart). Its init runs as one of the
// first: it imports only runtime and syscall, and Go initializes the
// first package by import path whose imports are initialized.
//
// The tests of package main, which link it too, set GOMAXPROCS back to
// the runtime's default (app_test.go).
package oneproc
