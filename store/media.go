package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/opentalon/opentalon/core"
)

// MediaDir is the folder of the media store inside the data directory.
const MediaDir = "media"

// mediaDir is where this database's media files live.
func (db *DB) mediaDir() string {
	if db.media != "" {
		return db.media
	}
	return filepath.Join(db.dataDir, MediaDir)
}

// blobStore wraps the media's core.BlobStore for an atomic pointer.
type blobStore struct{ core.BlobStore }

// UseBlobs makes b keep the media files too (plugins.blobs.plugin): each
// file stored is put under media/<sha256>, one missing from the media
// directory (then this machine's cache) is read back from b, and the
// sweep deletes it from b as well. A put b fails is logged: the file
// stays in the local cache and the message goes on.
func (db *DB) UseBlobs(b core.BlobStore) {
	if b == nil {
		db.blobs.Store(nil)
		return
	}
	db.blobs.Store(&blobStore{b})
}

// mediaBlob is the blob key of a media file.
func mediaBlob(sha string) string { return "media/" + sha }

// putBlob puts a stored file's bytes into the blob store, if one is used.
func (db *DB) putBlob(ctx context.Context, sha string, data []byte) {
	b := db.blobs.Load()
	if b == nil {
		return
	}
	if err := b.Put(ctx, mediaBlob(sha), data); err != nil {
		db.log.Warn("media: the blob store did not take a file; it is kept in the local media directory only", "sha256", sha, "err", err)
	}
}

// validSHA accepts a lowercase hex SHA-256 only: it names a file.
func validSHA(sha string) bool {
	if len(sha) != 64 {
		return false
	}
	for _, c := range sha {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// PutMedia implements core.MediaStore.
func (db *DB) PutMedia(ctx context.Context, data []byte, mime string) (string, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	if err := db.writeMediaFile(sha, func(f *os.File) error { _, err := f.Write(data); return err }); err != nil {
		return "", err
	}
	db.putBlob(ctx, sha, data)
	return sha, db.recordMedia(ctx, sha, mime, int64(len(data)), "", data)
}

// StoreMedia stores what r yields, at most limit bytes (more is
// core.ErrTooLarge, and reading stops there), and records source (the
// platform's name of the file) as that content. It returns the stored
// file.
func (db *DB) StoreMedia(ctx context.Context, source, mime string, r io.Reader, limit int64) (core.MediaFile, error) {
	if err := os.MkdirAll(db.mediaDir(), 0o700); err != nil {
		return core.MediaFile{}, fmt.Errorf("create the media store %s: %w", db.mediaDir(), err)
	}
	tmp, err := os.CreateTemp(db.mediaDir(), ".incoming-*")
	if err != nil {
		return core.MediaFile{}, fmt.Errorf("media store: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return core.MediaFile{}, err
	}
	if n > limit {
		return core.MediaFile{}, core.ErrTooLarge
	}
	sha := hex.EncodeToString(h.Sum(nil))
	path := filepath.Join(db.mediaDir(), sha)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return core.MediaFile{}, fmt.Errorf("media store: %w", err)
	}
	var data []byte
	if db.d.concurrent || db.blobs.Load() != nil {
		// Replicas share the bytes through the database, and a blob
		// store keeps them; this file is this machine's cache of them.
		if data, err = os.ReadFile(path); err != nil {
			return core.MediaFile{}, fmt.Errorf("media store: %w", err)
		}
		db.putBlob(ctx, sha, data)
	}
	if err := db.recordMedia(ctx, sha, mime, n, source, data); err != nil {
		return core.MediaFile{}, err
	}
	return core.MediaFile{SHA256: sha, MIME: mime, Size: n}, nil
}

// writeMediaFile writes the file of sha unless it is there already.
func (db *DB) writeMediaFile(sha string, write func(*os.File) error) error {
	dir := db.mediaDir()
	if _, err := os.Stat(filepath.Join(dir, sha)); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the media store %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".incoming-*")
	if err != nil {
		return fmt.Errorf("media store: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = write(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("media store: %w", err)
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, sha))
}

// recordMedia upserts the row of a stored file and, when source is set,
// what it is the content of. On a database replicas share (PostgreSQL)
// the bytes go into media_bytes too, so another replica reads them
// without downloading the file again; <data_dir>/media is then each
// replica's cache.
func (db *DB) recordMedia(ctx context.Context, sha, mime string, size int64, source string, data []byte) error {
	now := db.ms()
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO media (sha256, mime, size, created_at, used_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (sha256) DO UPDATE SET used_at = excluded.used_at`, sha, mime, size, now, now); err != nil {
			return fmt.Errorf("record media %s: %w", sha, err)
		}
		if db.d.concurrent {
			if _, err := tx.ExecContext(ctx, `INSERT INTO media_bytes (sha256, data) VALUES (?, ?) ON CONFLICT (sha256) DO NOTHING`, sha, data); err != nil {
				return fmt.Errorf("record media %s: %w", sha, err)
			}
		}
		if source == "" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO media_sources (source, sha256, created_at) VALUES (?, ?, ?)
			ON CONFLICT (source) DO UPDATE SET sha256 = excluded.sha256`, source, sha, now); err != nil {
			return fmt.Errorf("record media source: %w", err)
		}
		return nil
	})
}

// MediaBySource returns the stored content of a platform file; ok is
// false when it was never stored (or its file is gone).
func (db *DB) MediaBySource(ctx context.Context, source string) (core.MediaFile, bool, error) {
	var f core.MediaFile
	var text sql.NullString
	err := db.r.QueryRowContext(ctx, `SELECT m.sha256, m.mime, m.size, m.text FROM media_sources s JOIN media m ON m.sha256 = s.sha256
		WHERE s.source = ?`, source).Scan(&f.SHA256, &f.MIME, &f.Size, &text)
	if errors.Is(err, sql.ErrNoRows) {
		return core.MediaFile{}, false, nil
	}
	if err != nil {
		return core.MediaFile{}, false, fmt.Errorf("media of %s: %w", source, err)
	}
	if _, err := os.Stat(filepath.Join(db.mediaDir(), f.SHA256)); err != nil && db.blobs.Load() == nil {
		// (With a blob store, ReadMedia reads it from there.)
		if !db.d.concurrent {
			return core.MediaFile{}, false, nil
		}
		// Stored by another replica: its bytes are in the database.
		var one int
		err := db.r.QueryRowContext(ctx, `SELECT 1 FROM media_bytes WHERE sha256 = ?`, f.SHA256).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return core.MediaFile{}, false, nil
		}
		if err != nil {
			return core.MediaFile{}, false, fmt.Errorf("media of %s: %w", source, err)
		}
	}
	f.Text, f.HasText = text.String, text.Valid
	return f, true, nil
}

// SetMediaText keeps what was read from a stored file.
func (db *DB) SetMediaText(ctx context.Context, sha, text string) error {
	text = core.CleanText(text) // a PDF's or a transcript's: PostgreSQL refuses NUL and broken UTF-8
	if _, err := db.w.ExecContext(ctx, `UPDATE media SET text = ? WHERE sha256 = ?`, text, sha); err != nil {
		return fmt.Errorf("media %s: keep its text: %w", sha, err)
	}
	return nil
}

// ReadMedia implements core.MediaStore.
func (db *DB) ReadMedia(ctx context.Context, sha string) ([]byte, error) {
	if !validSHA(sha) {
		return nil, core.Errorf(core.KindInvalid, "media: %q is not a SHA-256 digest", sha)
	}
	gone := func(err error) error {
		return &core.Error{Kind: core.KindNotFound, Msg: "the file is no longer kept (media.retention)", Err: err}
	}
	path := filepath.Join(db.mediaDir(), sha)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b, err = db.readMediaBlob(ctx, sha)
	}
	if errors.Is(err, os.ErrNotExist) && db.d.concurrent {
		b, err = db.readMediaBytes(ctx, sha)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, gone(err)
	}
	if err != nil {
		return nil, fmt.Errorf("media %s: %w", sha, err)
	}
	res, err := db.w.ExecContext(ctx, `UPDATE media SET used_at = ? WHERE sha256 = ?`, db.ms(), sha)
	if err != nil {
		db.log.Warn("media: mark a file used", "sha256", sha, "err", err)
	} else if n, _ := res.RowsAffected(); n == 0 && db.d.concurrent {
		// Swept by another replica: this cached copy is stale.
		_ = os.Remove(path)
		return nil, gone(os.ErrNotExist)
	}
	return b, nil
}

// readMediaBlob reads a file's bytes from the blob store, if one is
// used, and keeps them in the local cache; a file it does not have (or no
// blob store) is os.ErrNotExist.
func (db *DB) readMediaBlob(ctx context.Context, sha string) ([]byte, error) {
	bs := db.blobs.Load()
	if bs == nil {
		return nil, os.ErrNotExist
	}
	b, err := bs.Get(ctx, mediaBlob(sha))
	if core.ErrorKind(err) == core.KindNotFound {
		return nil, os.ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("the blob store: %w", err)
	}
	if err := db.writeMediaFile(sha, func(f *os.File) error { _, err := f.Write(b); return err }); err != nil {
		db.log.Warn("media: cache a file read from the blob store", "sha256", sha, "err", err)
	}
	return b, nil
}

// readMediaBytes reads a file's bytes from the database (PostgreSQL,
// where replicas share them) and keeps them in this replica's cache; a
// file the database does not have is os.ErrNotExist.
func (db *DB) readMediaBytes(ctx context.Context, sha string) ([]byte, error) {
	var b []byte
	err := db.r.QueryRowContext(ctx, `SELECT data FROM media_bytes WHERE sha256 = ?`, sha).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, os.ErrNotExist
	}
	if err != nil {
		return nil, err
	}
	if err := db.writeMediaFile(sha, func(f *os.File) error { _, err := f.Write(b); return err }); err != nil {
		db.log.Warn("media: cache a file read from the database", "sha256", sha, "err", err)
	}
	return b, nil
}

// SweepMedia removes the files not used since before, with their rows;
// it returns how many it removed.
func (db *DB) SweepMedia(ctx context.Context, before time.Time) (int, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT sha256 FROM media WHERE used_at < ?`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("sweep media: %w", err)
	}
	var old []string
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			rows.Close()
			return 0, err
		}
		old = append(old, sha)
	}
	rows.Close()
	n := 0
	for _, sha := range old {
		if validSHA(sha) {
			if err := os.Remove(filepath.Join(db.mediaDir(), sha)); err != nil && !errors.Is(err, os.ErrNotExist) {
				db.log.Warn("media: remove an old file", "sha256", sha, "err", err)
				continue
			}
			if bs := db.blobs.Load(); bs != nil {
				if err := bs.Delete(ctx, mediaBlob(sha)); err != nil {
					db.log.Warn("media: remove an old file from the blob store", "sha256", sha, "err", err)
					continue
				}
			}
		}
		if _, err := db.w.ExecContext(ctx, `DELETE FROM media WHERE sha256 = ? AND used_at < ?`, sha, before.UnixMilli()); err != nil {
			return n, fmt.Errorf("sweep media: %w", err)
		}
		n++
	}
	return n, nil
}
