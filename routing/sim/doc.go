// Package sim is the router simulator behind `opentalon bench route`:
// it drives the real classifier, router, affinity and decay code of
// package routing against simulated models and users, on a fake clock
// and with no network, and reports acceptance, escalations, cost, regret
// against a per-task oracle and recovery after changes. The scenario
// format is documented in docs/routing.md; default.yaml is the shipped
// scenario (bench/route/default.yaml links to it).
package sim
