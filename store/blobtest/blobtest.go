package blobtest

import (
	"bytes"
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// Run checks the BlobStore contract on a fresh store: put, get, replace,
// delete, a missing key (KindNotFound; Delete is no error), keys that
// are paths, and keys that must be refused.
func Run(t *testing.T, bs core.BlobStore) {
	t.Helper()
	ctx := context.Background()
	t.Run("PutGetReplace", func(t *testing.T) {
		if err := bs.Put(ctx, "exports/2026/usage.json", []byte(`{"a":1}`)); err != nil {
			t.Fatal(err)
		}
		got, err := bs.Get(ctx, "exports/2026/usage.json")
		if err != nil || string(got) != `{"a":1}` {
			t.Fatalf("get = %q, %v", got, err)
		}
		big := bytes.Repeat([]byte{0, 1, 2, 255}, 256<<10) // 1 MiB of binary data
		if err := bs.Put(ctx, "exports/2026/usage.json", big); err != nil {
			t.Fatal(err)
		}
		if got, err := bs.Get(ctx, "exports/2026/usage.json"); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("replaced blob: %d bytes, %v; want the 1 MiB written", len(got), err)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		if err := bs.Put(ctx, "empty", nil); err != nil {
			t.Fatal(err)
		}
		if got, err := bs.Get(ctx, "empty"); err != nil || len(got) != 0 {
			t.Fatalf("get empty = %q, %v", got, err)
		}
	})
	t.Run("DeleteAndMissing", func(t *testing.T) {
		if err := bs.Put(ctx, "media/a.png", []byte("png")); err != nil {
			t.Fatal(err)
		}
		if err := bs.Delete(ctx, "media/a.png"); err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Get(ctx, "media/a.png"); core.ErrorKind(err) != core.KindNotFound {
			t.Fatalf("get deleted: %v; want KindNotFound", err)
		}
		if err := bs.Delete(ctx, "media/a.png"); err != nil {
			t.Fatalf("delete missing: %v; want no error", err)
		}
		if _, err := bs.Get(ctx, "never"); core.ErrorKind(err) != core.KindNotFound {
			t.Fatalf("get never-written: %v; want KindNotFound", err)
		}
	})
	t.Run("BadKeys", func(t *testing.T) {
		for _, k := range []string{"", "../etc/passwd", "/abs", "a//b", "a/./b", "sp ace", "a/..", "é"} {
			if err := bs.Put(ctx, k, []byte("x")); core.ErrorKind(err) != core.KindInvalid {
				t.Errorf("put %q: %v; want KindInvalid", k, err)
			}
			if _, err := bs.Get(ctx, k); core.ErrorKind(err) != core.KindInvalid {
				t.Errorf("get %q: %v; want KindInvalid", k, err)
			}
		}
	})
}
