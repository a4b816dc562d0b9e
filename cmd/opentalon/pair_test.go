package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// pairings is an in-memory pairStore.
type pairings []core.Pairing

func (p pairings) Pairings(context.Context, string) ([]core.Pairing, error) { return p, nil }
func (p pairings) DecidePairing(context.Context, string, string, bool, string) (core.Pairing, error) {
	return core.Pairing{}, core.Errorf(core.KindNotFound, "not here")
}

// `opentalon pair list` shows a request whose code ran out as expired,
// not as pending: approving it is refused.
func TestPairListShowsExpiredRequests(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	db := pairings{
		{Channel: "telegram", UserID: "1", Code: "FRESH234", Status: core.PairingPending, RequestedAt: now.Add(-time.Hour)},
		{Channel: "telegram", UserID: "2", Code: "STALE234", Status: core.PairingPending, RequestedAt: now.Add(-core.PairingTTL - time.Hour)},
	}
	var out bytes.Buffer
	if err := runPair(context.Background(), db, now, []string{"list"}, &out); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			status[f[0]] = f[1]
		}
	}
	if status["FRESH234"] != "pending" || status["STALE234"] != "expired" {
		t.Fatalf("pair list:\n%s\nwant FRESH234 pending and STALE234 expired", out.String())
	}
}
