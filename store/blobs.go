package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opentalon/opentalon/core"
)

// BlobDir is the directory of the default blob store inside the data
// directory.
const BlobDir = "blobs"

// FileBlobs is the default core.BlobStore: one file per key under a
// directory (<data_dir>/blobs), written atomically, readable only by the
// gateway's user.
type FileBlobs struct {
	dir string
}

var _ core.BlobStore = (*FileBlobs)(nil)

// NewFileBlobs returns the blob store under dir; the directory is made
// on the first Put.
func NewFileBlobs(dir string) *FileBlobs { return &FileBlobs{dir: dir} }

func (b *FileBlobs) path(key string) (string, error) {
	if err := core.ValidBlobKey(key); err != nil {
		return "", err
	}
	return filepath.Join(b.dir, filepath.FromSlash(key)), nil
}

// Put implements core.BlobStore.
func (b *FileBlobs) Put(_ context.Context, key string, data []byte) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("blob %s: %w", key, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return fmt.Errorf("blob %s: %w", key, err)
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("blob %s: %w", key, err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("blob %s: %w", key, err)
	}
	return nil
}

// Get implements core.BlobStore.
func (b *FileBlobs) Get(_ context.Context, key string) ([]byte, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, core.Errorf(core.KindNotFound, "no blob %s", key)
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", key, err)
	}
	return data, nil
}

// Delete implements core.BlobStore.
func (b *FileBlobs) Delete(_ context.Context, key string) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob %s: %w", key, err)
	}
	return nil
}
