package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

// SealKeySize is the size of Options.SealKey: an AES-256 key.
const SealKeySize = 32

// sealer seals the short-lived credentials the sealed table keeps.
func (db *DB) sealer() (cipher.AEAD, error) {
	if len(db.sealKey) != SealKeySize {
		return nil, core.Errorf(core.KindInvalid, "no seal key: set state.seal_key (or a channel's token, from which one is derived)")
	}
	block, err := aes.NewCipher(db.sealKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// KeepSealed stores secret under name, sealed with AES-256-GCM under the
// seal key (the name is bound to it as additional data, so a sealed value
// moved to another row does not open), until expires; a second call for
// one name replaces the first. The plaintext never reaches the database.
func (db *DB) KeepSealed(ctx context.Context, name, secret string, expires time.Time) error {
	aead, err := db.sealer()
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := aead.Seal(nonce, nonce, []byte(secret), []byte(name))
	if _, err := db.w.ExecContext(ctx, `INSERT INTO sealed (name, sealed, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, expires_at = excluded.expires_at`, name, sealed, expires.UnixMilli()); err != nil {
		return fmt.Errorf("keep sealed %s: %w", name, err)
	}
	return nil
}

// OpenSealed returns the secret kept under name; ok is false when there
// is none, it expired, or it does not open under this seal key (the key
// changed: the credential is as good as gone).
func (db *DB) OpenSealed(ctx context.Context, name string) (secret string, ok bool, err error) {
	aead, err := db.sealer()
	if err != nil {
		return "", false, err
	}
	var sealed []byte
	var expires int64
	err = db.r.QueryRowContext(ctx, `SELECT sealed, expires_at FROM sealed WHERE name = ?`, name).Scan(&sealed, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("open sealed %s: %w", name, err)
	}
	if db.ms() >= expires || len(sealed) < aead.NonceSize() {
		return "", false, nil
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(name))
	if err != nil {
		db.log.Warn("a sealed credential does not open under the seal key (state.seal_key or the channel tokens changed); it is treated as gone", "name", name)
		return "", false, nil
	}
	return string(plain), true, nil
}

// DropSealed deletes what is kept under name (its request was answered).
func (db *DB) DropSealed(ctx context.Context, name string) error {
	if _, err := db.w.ExecContext(ctx, `DELETE FROM sealed WHERE name = ?`, name); err != nil {
		return fmt.Errorf("drop sealed %s: %w", name, err)
	}
	return nil
}

// SweepSealed deletes the sealed values expired at now and returns how
// many.
func (db *DB) SweepSealed(ctx context.Context, now time.Time) (int, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM sealed WHERE expires_at <= ?`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("sweep sealed: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Replied implements core.ReplyLedger: whether a reply was stored in conv
// (by any replica sharing this database).
func (db *DB) Replied(ctx context.Context, conv core.ConversationKey) (bool, error) {
	var one int
	err := db.r.QueryRowContext(ctx, `SELECT 1 FROM replies WHERE conversation = ? LIMIT 1`, conv.String()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("replies of %s: %w", conv, err)
	}
	return true, nil
}

// LatestThread implements core.ThreadLedger from the usage ledger, which
// records each answer's conversation and user: the thread of conv's chat
// whose latest answer to userID is the newest ("" when none is).
func (db *DB) LatestThread(ctx context.Context, conv core.ConversationKey, userID string) (string, error) {
	chat := core.ConversationKey{Channel: conv.Channel, Chat: conv.Chat}.String()
	// The chat's threads are the conversations from "<chat>:" up to
	// "<chat>;" (';' follows ':'), the range the conversation index
	// reads.
	var last string
	err := db.r.QueryRowContext(ctx, `SELECT conversation FROM usage
		WHERE conversation >= ? AND conversation < ? AND user_id = ?
		ORDER BY at DESC, id DESC LIMIT 1`, chat+":", chat+";", userID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("latest thread of %s: %w", chat, err)
	}
	return core.ParseConversationKey(last).Thread, nil
}
