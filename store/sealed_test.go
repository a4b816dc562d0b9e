package store

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestSealedHoldsNoPlaintext: the row of a kept credential holds neither
// the secret nor any part of it, and a sealed value copied under another
// name does not open.
func TestSealedHoldsNoPlaintext(t *testing.T) {
	ctx := context.Background()
	db, err := OpenFile(ctx, filepath.Join(t.TempDir(), FileName), Options{SealKey: bytes.Repeat([]byte{1}, SealKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const secret = "interaction-token-aW50ZXJhY3Rpb24"
	if err := db.KeepSealed(ctx, "discord:interaction:1", secret, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := db.r.QueryRowContext(ctx, `SELECT sealed FROM sealed WHERE name = ?`, "discord:interaction:1").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte(secret)) || bytes.Contains(stored, []byte("aW50ZXJhY3Rpb24")) {
		t.Fatalf("the stored row holds the plaintext: %q", stored)
	}
	if _, err := db.w.ExecContext(ctx, `INSERT INTO sealed (name, sealed, expires_at) VALUES (?, ?, ?)`, "discord:interaction:2", stored, time.Now().Add(time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := db.OpenSealed(ctx, "discord:interaction:2"); err != nil || ok || got != "" {
		t.Fatalf("a sealed value moved to another name opened: %q %v %v", got, ok, err)
	}
	if got, ok, err := db.OpenSealed(ctx, "discord:interaction:1"); err != nil || !ok || got != secret {
		t.Fatalf("open = %q %v %v", got, ok, err)
	}
}
