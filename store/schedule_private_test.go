package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/opentalon/opentalon/store/pgtest"
)

// TestSchedulePrivateMigration: migration 192 records, for the schedules
// made before it, whether each was made in a private chat, on both
// engines: a chat schedule only where its row proves a chat with the bot
// alone (a Telegram chat whose id is its creator's, a Slack D… channel,
// the console); a group's, a Discord channel's (a DM cannot be told by
// its id), the config's and plugins' stay not private. A schedule made
// after it keeps what it was given.
func TestSchedulePrivateMigration(t *testing.T) {
	for _, engine := range []struct {
		name string
		open func(t *testing.T) func() *DB
	}{
		{"sqlite", func(t *testing.T) func() *DB {
			path := filepath.Join(t.TempDir(), FileName)
			return func() *DB {
				db, err := OpenFile(context.Background(), path, Options{})
				if err != nil {
					t.Fatal(err)
				}
				return db
			}
		}},
		{"postgres", func(t *testing.T) func() *DB {
			dsn, dir := pgtest.DSN(t), t.TempDir()
			return func() *DB {
				db, err := Open(context.Background(), dir, Options{Postgres: &Postgres{DSN: dsn}})
				if err != nil {
					t.Fatal(err)
				}
				return db
			}
		}},
	} {
		t.Run(engine.name, func(t *testing.T) {
			ctx := context.Background()
			open := engine.open(t)
			db := open()
			// Back to schema 191: no column, migration 192 not applied.
			for _, q := range []string{`ALTER TABLE schedules DROP COLUMN private`, `DELETE FROM schema_migrations WHERE version = 192`} {
				if _, err := db.w.DB.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			rows := []struct {
				source, channel, chat, creator string
				private                        bool
			}{
				{"chat", "telegram", "42", "42", true},
				{"chat", "telegram", "-100123", "42", false},
				{"chat", "telegram", "", "", false},
				{"chat", "slack", "D0123", "U1", true},
				{"chat", "slack", "C0123", "U1", false},
				{"chat", "slack", "G0123", "U1", false}, // a private channel or a group DM: others read it
				{"chat", "console", "local", "operator", true},
				{"chat", "discord", "123456789", "42", false},
				{"config", "telegram", "42", "", false},
				{"plugin:weather", "slack", "D0123", "", false},
			}
			for i, r := range rows {
				if _, err := db.w.DB.ExecContext(ctx, db.d.rebind(`INSERT INTO schedules (source, key, channel, chat, creator, created_at) VALUES (?, ?, ?, ?, ?, 0)`),
					r.source, string(rune('a'+i)), r.channel, r.chat, r.creator); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()

			db = open()
			defer db.Close()
			got, err := db.Schedules(ctx)
			if err != nil || len(got) != len(rows) {
				t.Fatalf("schedules = %+v, %v; want %d", got, err, len(rows))
			}
			for i, s := range got {
				if r := rows[i]; s.Private != r.private {
					t.Errorf("%s schedule in %s:%s by %q: private %v; want %v", r.source, r.channel, r.chat, r.creator, s.Private, r.private)
				}
			}
		})
	}
}
