package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

var _ core.PairingStore = (*DB)(nil)

const pairingCols = `channel, user_id, user_name, conversation, code, status, requested_at, decided_at, decided_by`

func scanPairing(sc interface{ Scan(...any) error }) (core.Pairing, error) {
	var p core.Pairing
	var conv string
	var req, dec int64
	if err := sc.Scan(&p.Channel, &p.UserID, &p.UserName, &conv, &p.Code, &p.Status, &req, &dec, &p.DecidedBy); err != nil {
		return p, err
	}
	p.Conversation = core.ParseConversationKey(conv)
	p.RequestedAt = time.UnixMilli(req)
	if dec > 0 {
		p.DecidedAt = time.UnixMilli(dec)
	}
	return p, nil
}

// Pairing implements core.PairingStore.
func (db *DB) Pairing(ctx context.Context, channel, userID string) (*core.Pairing, error) {
	p, err := scanPairing(db.r.QueryRowContext(ctx, `SELECT `+pairingCols+` FROM pairings WHERE channel = ? AND user_id = ?`, channel, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pairing: %w", err)
	}
	return &p, nil
}

// RequestPairing implements core.PairingStore.
func (db *DB) RequestPairing(ctx context.Context, p core.Pairing) (core.Pairing, error) {
	if p.Channel == "" || p.UserID == "" || p.Code == "" {
		return p, core.Errorf(core.KindInvalid, "pairing request: channel, user id and code are required")
	}
	at := p.RequestedAt
	if at.IsZero() {
		at = db.now()
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO pairings (channel, user_id, user_name, conversation, code, status, requested_at)
		VALUES (?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT (channel, user_id) DO NOTHING`,
		p.Channel, p.UserID, core.CleanText(p.UserName), p.Conversation.String(), p.Code, at.UnixMilli())
	if err != nil {
		// The (channel, user) key cannot conflict (DO NOTHING): a refused
		// row here is another user's code.
		if uniqueViolation(err) {
			return p, core.ErrPairingCodeTaken
		}
		return p, fmt.Errorf("record pairing request: %w", err)
	}
	got, err := scanPairing(db.w.QueryRowContext(ctx, `SELECT `+pairingCols+` FROM pairings WHERE channel = ? AND user_id = ?`, p.Channel, p.UserID))
	if err != nil {
		return p, fmt.Errorf("read pairing request: %w", err)
	}
	return got, nil
}

// DecidePairing implements core.PairingStore.
func (db *DB) DecidePairing(ctx context.Context, channel, code string, approve bool, by string) (core.Pairing, error) {
	status := core.PairingDenied
	if approve {
		status = core.PairingApproved
	}
	var p core.Pairing
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE pairings SET status = ?, decided_at = ?, decided_by = ? WHERE code = ? AND (? = '' OR channel = ?)`,
			status, db.ms(), by, code, channel, channel)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			where := ""
			if channel != "" {
				where = " on " + channel
			}
			return core.Errorf(core.KindNotFound, "no pairing request with code %s%s (see opentalon pair list)", code, where)
		}
		p, err = scanPairing(tx.QueryRowContext(ctx, `SELECT `+pairingCols+` FROM pairings WHERE code = ?`, code))
		return err
	})
	if err != nil {
		if core.ErrorKind(err) == core.KindNotFound {
			return p, err
		}
		return p, fmt.Errorf("decide pairing %s: %w", code, err)
	}
	return p, nil
}

// Pairings implements core.PairingStore.
func (db *DB) Pairings(ctx context.Context, channel string) ([]core.Pairing, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+pairingCols+` FROM pairings WHERE ? = '' OR channel = ?
		ORDER BY status <> 'pending', requested_at DESC`, channel, channel)
	if err != nil {
		return nil, fmt.Errorf("list pairings: %w", err)
	}
	defer rows.Close()
	var out []core.Pairing
	for rows.Next() {
		p, err := scanPairing(rows)
		if err != nil {
			return nil, fmt.Errorf("list pairings: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// ExpirePairings implements core.PairingStore: the pending requests made
// before before are removed (their codes can no longer be approved).
func (db *DB) ExpirePairings(ctx context.Context, before time.Time) (int, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM pairings WHERE status = 'pending' AND requested_at < ?`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("expire pairing requests: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
