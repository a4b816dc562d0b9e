package store

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"sync/atomic"
)

// SQLite spends most of a small query's time parsing and planning it.
// pool and txn run every query through a prepared statement kept for the
// life of the database, so each distinct query text is parsed once per
// connection instead of once per call. They are also the one place where
// a query's placeholders are rebound for the engine (dialect.rebind, once
// per query text) and, on PostgreSQL, where text arguments are checked
// before they reach a TEXT column (checkArgs).

// pool is a connection pool with a cache of prepared statements, keyed by
// query text. Safe for concurrent use.
type pool struct {
	*sql.DB
	d *dialect

	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	// wanted are queries first met inside a transaction: they cannot be
	// prepared on the pool then (the writer pool's only connection is
	// held by the transaction), so they are prepared after it ends.
	wanted map[string]bool

	// trips counts what the pool sends (shared by a DB's pools).
	trips *tripCounter
}

func newPool(db *sql.DB, d *dialect, trips *tripCounter) *pool {
	return &pool{DB: db, d: d, stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}, trips: trips}
}

// cached returns the prepared statement for q, or nil.
func (p *pool) cached(q string) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stmts[q]
}

// stmt returns the prepared statement for q, preparing it on a
// connection of the pool if needed. Call it only while holding no
// connection of the pool.
func (p *pool) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if s := p.cached(q); s != nil {
		return s, nil
	}
	s, err := p.DB.PrepareContext(ctx, p.d.rebind(q))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.stmts[q]; old != nil {
		// Prepared concurrently by another caller: keep one.
		s.Close()
		return old, nil
	}
	p.stmts[q] = s
	return s, nil
}

// ExecContext runs q through its prepared statement.
func (p *pool) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	p.trips.statement(q, true)
	ctx = p.d.statementCtx(ctx)
	if err := p.d.checkArgs(args); err != nil {
		return nil, err
	}
	s, err := p.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// QueryContext runs q through its prepared statement.
func (p *pool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	p.trips.statement(q, true)
	ctx = p.d.statementCtx(ctx)
	if err := p.d.checkArgs(args); err != nil {
		return nil, err
	}
	s, err := p.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// QueryRowContext runs q through its prepared statement.
func (p *pool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	p.trips.statement(q, true)
	ctx = p.d.statementCtx(ctx)
	if err := p.d.checkArgs(args); err != nil {
		return p.DB.QueryRowContext(ctx, p.d.rebind(q), refused(args, err)...)
	}
	s, err := p.stmt(ctx, q)
	if err != nil {
		// Let database/sql report the same error through a *sql.Row.
		return p.DB.QueryRowContext(ctx, p.d.rebind(q), args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// BeginTx starts a transaction whose queries use the cache.
// On SQLite database/sql does not watch ctx to roll the transaction back
// (see statementCtx); the transaction's next statement fails once ctx
// has ended, and the caller rolls back.
func (p *pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*txn, error) {
	tx, err := p.DB.BeginTx(p.d.statementCtx(ctx), opts)
	if err != nil {
		return nil, err
	}
	p.trips.begin()
	return &txn{Tx: tx, p: p}, nil
}

// prepareWanted prepares the queries first met inside a transaction
// (best effort: a failure leaves the query unprepared, to be parsed per
// call as before).
func (p *pool) prepareWanted(ctx context.Context) {
	p.mu.Lock()
	var qs []string
	for q := range p.wanted {
		qs = append(qs, q)
	}
	clear(p.wanted)
	p.mu.Unlock()
	for _, q := range qs {
		p.stmt(ctx, q)
	}
}

// Close closes the prepared statements and the pool.
func (p *pool) Close() error {
	p.mu.Lock()
	for q, s := range p.stmts {
		s.Close()
		delete(p.stmts, q)
	}
	p.mu.Unlock()
	return p.DB.Close()
}

// txn is a transaction whose queries use the pool's prepared statements
// (database/sql re-uses a statement already prepared on the
// transaction's connection).
type txn struct {
	*sql.Tx
	p *pool
	// missed says a query was not prepared yet.
	missed bool
}

// stmt returns q's statement bound to the transaction, or nil when q is
// not prepared yet (it is then noted for preparation after the
// transaction).
func (t *txn) stmt(ctx context.Context, q string) *sql.Stmt {
	s := t.p.cached(q)
	if s == nil {
		t.p.mu.Lock()
		t.p.wanted[q] = true
		t.p.mu.Unlock()
		t.missed = true
		return nil
	}
	return t.Tx.StmtContext(ctx, s)
}

// ExecContext runs q in the transaction.
func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	t.p.trips.statement(q, false)
	ctx = t.p.d.statementCtx(ctx)
	if err := t.p.d.checkArgs(args); err != nil {
		return nil, err
	}
	if s := t.stmt(ctx, q); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, t.p.d.rebind(q), args...)
}

// QueryContext runs q in the transaction.
func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	t.p.trips.statement(q, false)
	ctx = t.p.d.statementCtx(ctx)
	if err := t.p.d.checkArgs(args); err != nil {
		return nil, err
	}
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, t.p.d.rebind(q), args...)
}

// QueryRowContext runs q in the transaction.
func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	t.p.trips.statement(q, false)
	ctx = t.p.d.statementCtx(ctx)
	if err := t.p.d.checkArgs(args); err != nil {
		return t.Tx.QueryRowContext(ctx, t.p.d.rebind(q), refused(args, err)...)
	}
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, t.p.d.rebind(q), args...)
}

// Trips counts what a DB sent to its database since it was opened: the
// cost of a piece of work in round trips, independent of the machine's
// speed (tests hold the message path to a budget with it).
type Trips struct {
	// Calls are the store's round trips as its callers see them: each
	// statement run on its own, and each transaction as one.
	Calls int64
	// Writes are the write transactions among Calls: a transaction, or a
	// statement on its own that is not a SELECT.
	Writes int64
	// Statements counts every statement, inside transactions too (on
	// PostgreSQL each is a network round trip, and a transaction adds
	// its BEGIN and COMMIT).
	Statements int64
}

// Sub is t minus an earlier count.
func (t Trips) Sub(u Trips) Trips {
	return Trips{Calls: t.Calls - u.Calls, Writes: t.Writes - u.Writes, Statements: t.Statements - u.Statements}
}

// tripCounter is the count of a DB's pools; trace, when set, receives
// each statement's text (tests).
type tripCounter struct {
	calls, writes, statements atomic.Int64
	trace                     atomic.Pointer[func(q string, inTx bool)]
	// ckpt is the background checkpoint, told of each write (SQLite;
	// checkpoint.go).
	ckpt atomic.Pointer[checkpointer]
}

// statement counts q, run on its own (alone) or in a transaction.
func (c *tripCounter) statement(q string, alone bool) {
	if c == nil {
		return
	}
	c.statements.Add(1)
	if alone {
		c.calls.Add(1)
		if !isRead(q) {
			c.writes.Add(1)
			c.ckpt.Load().wrote()
		}
	}
	if f := c.trace.Load(); f != nil {
		(*f)(q, !alone)
	}
}

// begin counts a transaction (every transaction of the store writes).
func (c *tripCounter) begin() {
	if c == nil {
		return
	}
	c.calls.Add(1)
	c.writes.Add(1)
	c.ckpt.Load().wrote()
	if f := c.trace.Load(); f != nil {
		(*f)("BEGIN", false)
	}
}

// isRead says q only reads: a SELECT that calls none of the store's
// writing functions (PostgreSQL's queue_enqueue and queue_finish).
func isRead(q string) bool {
	q = strings.TrimLeft(q, " \t\n")
	return len(q) >= 6 && strings.EqualFold(q[:6], "SELECT") && !strings.Contains(q, "queue_enqueue(") && !strings.Contains(q, "queue_finish(")
}

// Trips is what the database was sent since the DB was opened.
func (db *DB) Trips() Trips {
	c := &db.trips
	return Trips{Calls: c.calls.Load(), Writes: c.writes.Load(), Statements: c.statements.Load()}
}

// TraceTrips has f called with the text of every statement the DB sends
// (and "BEGIN" for each transaction) until it is called with nil; for
// tests that explain a count.
func (db *DB) TraceTrips(f func(q string, inTx bool)) {
	if f == nil {
		db.trips.trace.Store(nil)
		return
	}
	db.trips.trace.Store(&f)
}
