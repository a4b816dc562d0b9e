package store

import (
	"context"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestAddSignalAndAffinity(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	at := time.UnixMilli(1_700_000_000_000).UTC()
	sig := core.Signal{Kind: "accepted", Polarity: core.Positive, ReplyID: 9, Model: "fake/small", TaskType: "chat", UserID: "u", Weight: 1, At: at}
	inc := func(a core.Affinity) core.Affinity {
		a.Pos++
		a.Positives++
		a.LastSignal, a.UpdatedAt = at, at
		return a
	}
	for range 2 {
		if id, err := db.AddSignalAndAffinity(ctx, sig, "chat", "fake/small", inc); err != nil || id == 0 {
			t.Fatalf("AddSignalAndAffinity = %d, %v", id, err)
		}
	}
	sigs, err := db.SignalsForReply(ctx, 9)
	if err != nil || len(sigs) != 2 || sigs[0].Kind != "accepted" || sigs[0].Model != "fake/small" || !sigs[0].At.Equal(at) {
		t.Fatalf("SignalsForReply = %+v, %v", sigs, err)
	}
	all, err := db.Affinities(ctx)
	if err != nil || len(all) != 1 || all[0].Task != "chat" || all[0].Model != "fake/small" || all[0].Pos != 2 || all[0].Positives != 2 {
		t.Fatalf("Affinities = %+v, %v", all, err)
	}

}
