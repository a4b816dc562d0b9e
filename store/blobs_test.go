package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/blobtest"
)

func TestFileBlobs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	bs := store.NewFileBlobs(dir)
	blobtest.Run(t, bs)
	if err := bs.Put(context.Background(), "secret/x", []byte("s")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "secret")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v; want a 0700 directory", p, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "secret", "x")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("blob file mode %v %v; want 0600", fi.Mode(), err)
	}
}
