package pgtest

import (
	"database/sql"
	"net/url"
	"testing"
)

// ReadOnly is a login role of its own on the schema of a DSN's database
// whose sessions are read-only by default (default_transaction_read_only),
// as on a standby: the server refuses its writes with SQLSTATE 25006.
type ReadOnly struct {
	// DSN is the database's DSN logging in as the role.
	DSN string

	t     testing.TB
	role  string
	admin *sql.DB
}

// ReadOnlyRole makes such a role for dsn (from DSN), dropped when the
// test ends. It skips the test where the server's user is not a
// superuser (only a server named by OPENTALON_TEST_POSTGRES may not be).
func ReadOnlyRole(t testing.TB, dsn string) *ReadOnly {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	admin, err := sql.Open("postgres", AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	var super bool
	if err := admin.QueryRow(`SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	if !super {
		admin.Close()
		t.Skip("needs a superuser to make a role whose sessions are read-only (the private pgtest server's user is one)")
	}
	r := &ReadOnly{t: t, role: "ro_" + schema, admin: admin}
	r.exec(`CREATE ROLE ` + r.role + ` LOGIN PASSWORD 'pw-` + r.role + `'`)
	t.Cleanup(func() {
		// Before the schema is dropped (cleanups run last first).
		for _, q := range []string{`DROP OWNED BY ` + r.role + ` CASCADE`, `DROP ROLE ` + r.role} {
			if _, err := admin.Exec(q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
		admin.Close()
	})
	r.exec(`GRANT ALL ON SCHEMA ` + schema + ` TO ` + r.role)
	r.SetReadOnly(true)
	u.User = url.UserPassword(r.role, "pw-"+r.role)
	r.DSN = u.String()
	return r
}

// SetReadOnly turns the role's default read-only on or off (off is the
// promotion of a standby); it holds for the sessions started after.
func (r *ReadOnly) SetReadOnly(on bool) {
	r.t.Helper()
	if on {
		r.exec(`ALTER ROLE ` + r.role + ` SET default_transaction_read_only = on`)
	} else {
		r.exec(`ALTER ROLE ` + r.role + ` RESET default_transaction_read_only`)
	}
}

func (r *ReadOnly) exec(q string) {
	r.t.Helper()
	if _, err := r.admin.Exec(q); err != nil {
		r.t.Fatalf("%s: %v", q, err)
	}
}
