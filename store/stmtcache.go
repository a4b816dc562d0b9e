package store

import (
	"context"
	"database/sql"
	"sync"
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
}

func newPool(db *sql.DB, d *dialect) *pool {
	return &pool{DB: db, d: d, stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
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
func (p *pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*txn, error) {
	tx, err := p.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
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
	if err := t.p.d.checkArgs(args); err != nil {
		return t.Tx.QueryRowContext(ctx, t.p.d.rebind(q), refused(args, err)...)
	}
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, t.p.d.rebind(q), args...)
}
