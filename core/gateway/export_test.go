package gateway

// WorkersIdle says, for tests, that every worker slot of the running
// gateway is free and the dispatcher no longer holds them for queued
// work (workers.backlog): an aside command accepted now may take one.
func (g *Gateway) WorkersIdle() bool {
	p := g.pool.Load()
	return p != nil && p.free.Load() == p.size && !p.backlog.Load()
}
