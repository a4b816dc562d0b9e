package core

import (
	"context"
	"strings"
)

// BlobStore keeps files by key outside the database: files under
// <data_dir>/blobs by default, or a plugin (plugins.blobs). With a plugin
// the media store (MediaStore) keeps each file there too, under
// media/<sha256>, and <data_dir>/media is this machine's cache of them.
// The database itself always stays built in. Safe for concurrent use.
type BlobStore interface {
	// Put stores data under key, replacing what was there.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the data under key; a missing key is a KindNotFound
	// error.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes key; a missing key is no error.
	Delete(ctx context.Context, key string) error
}

// MaxBlobKey bounds a blob key's length.
const MaxBlobKey = 512

// ValidBlobKey checks a blob key: 1-512 characters of letters, digits,
// '.', '-', '_' and '/', made of path segments that are neither empty
// nor "." or "..", so every store may use it as a relative path.
func ValidBlobKey(key string) error {
	if key == "" || len(key) > MaxBlobKey {
		return Errorf(KindInvalid, "blob key %q: must be 1-%d characters", key, MaxBlobKey)
	}
	for _, r := range key {
		ok := r == '.' || r == '-' || r == '_' || r == '/' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !ok {
			return Errorf(KindInvalid, "blob key %q: use only letters, digits, '.', '-', '_' and '/'", key)
		}
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return Errorf(KindInvalid, "blob key %q: every '/'-separated part must be a name (not empty, '.' or '..')", key)
		}
	}
	return nil
}
