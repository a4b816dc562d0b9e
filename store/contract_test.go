package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
	"github.com/opentalon/opentalon/store/storetest"
)

// sqliteEngine opens databases in a temporary directory.
var sqliteEngine = storetest.Engine{Name: "sqlite", New: func(t *testing.T) func(store.Options) *store.DB {
	dir := t.TempDir()
	return func(o store.Options) *store.DB {
		t.Helper()
		db, err := store.OpenFile(context.Background(), filepath.Join(dir, store.FileName), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
}}

// postgresEngine opens databases on the test server of store/pgtest.
var postgresEngine = storetest.Engine{Name: "postgres", New: func(t *testing.T) func(store.Options) *store.DB {
	dsn, dir := pgtest.DSN(t), t.TempDir()
	return func(o store.Options) *store.DB {
		t.Helper()
		o.Postgres = &store.Postgres{DSN: dsn}
		db, err := store.Open(context.Background(), dir, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
}}

func TestContractSQLite(t *testing.T)   { storetest.Run(t, sqliteEngine) }
func TestContractPostgres(t *testing.T) { storetest.Run(t, postgresEngine) }

func TestRacesPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("4,000 items through 32 claimers")
	}
	storetest.RunRaces(t, postgresEngine, storetest.FullRace)
}
