package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

func TestPairings(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	db := openTest(t, Options{Now: clk.Now})
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}

	if p, err := db.Pairing(ctx, "telegram", "42"); err != nil || p != nil {
		t.Fatalf("Pairing of nobody = %v, %v; want nil, nil", p, err)
	}
	got, err := db.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "42", UserName: "@alice", Conversation: conv, Code: "AAAA2222", RequestedAt: clk.Now()})
	if err != nil || got.Status != core.PairingPending || got.Code != "AAAA2222" || got.Conversation != conv {
		t.Fatalf("RequestPairing = %+v, %v", got, err)
	}

	t.Run("a second request keeps the first code", func(t *testing.T) {
		again, err := db.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "42", Code: "BBBB3333"})
		if err != nil || again.Code != "AAAA2222" {
			t.Fatalf("second request = %+v, %v; want the first code", again, err)
		}
	})
	t.Run("another user cannot take the code", func(t *testing.T) {
		_, err := db.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: "43", Code: "AAAA2222"})
		if !errors.Is(err, core.ErrPairingCodeTaken) {
			t.Fatalf("err = %v; want ErrPairingCodeTaken", err)
		}
	})
	t.Run("a code of another channel is not found", func(t *testing.T) {
		_, err := db.DecidePairing(ctx, "slack", "AAAA2222", true, "7")
		if core.ErrorKind(err) != core.KindNotFound {
			t.Fatalf("err = %v; want KindNotFound", err)
		}
	})
	t.Run("approve", func(t *testing.T) {
		clk.Advance(time.Minute)
		p, err := db.DecidePairing(ctx, "telegram", "AAAA2222", true, "7")
		if err != nil || p.Status != core.PairingApproved || p.DecidedBy != "7" || !p.DecidedAt.Equal(clk.Now()) {
			t.Fatalf("approve = %+v, %v", p, err)
		}
		if p, _ := db.Pairing(ctx, "telegram", "42"); p == nil || p.Status != core.PairingApproved {
			t.Fatalf("after approval Pairing = %+v", p)
		}
	})
	t.Run("expire removes old pending requests only", func(t *testing.T) {
		if _, err := db.RequestPairing(ctx, core.Pairing{Channel: "discord", UserID: "D1", Code: "DDDD5555", RequestedAt: clk.Now().Add(-48 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		n, err := db.ExpirePairings(ctx, clk.Now().Add(-24*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("ExpirePairings = %d, %v; want the one old pending request", n, err)
		}
		if p, _ := db.Pairing(ctx, "discord", "D1"); p != nil {
			t.Fatalf("expired request still there: %+v", p)
		}
		if p, _ := db.Pairing(ctx, "telegram", "42"); p == nil || p.Status != core.PairingApproved {
			t.Fatalf("a decided request went too: %+v", p)
		}
	})
	t.Run("list puts pending first", func(t *testing.T) {
		if _, err := db.RequestPairing(ctx, core.Pairing{Channel: "slack", UserID: "U9", Code: "CCCC4444"}); err != nil {
			t.Fatal(err)
		}
		all, err := db.Pairings(ctx, "")
		if err != nil || len(all) != 2 || all[0].Code != "CCCC4444" || all[1].Code != "AAAA2222" {
			t.Fatalf("Pairings = %+v, %v", all, err)
		}
		tg, _ := db.Pairings(ctx, "telegram")
		if len(tg) != 1 || tg[0].UserID != "42" {
			t.Fatalf("telegram pairings = %+v", tg)
		}
	})
	t.Run("deny by code from any channel", func(t *testing.T) {
		p, err := db.DecidePairing(ctx, "", "CCCC4444", false, "cli")
		if err != nil || p.Status != core.PairingDenied || p.Channel != "slack" {
			t.Fatalf("deny = %+v, %v", p, err)
		}
	})
}
