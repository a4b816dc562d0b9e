package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// RaceSize shapes RunRaces' queue race: handles × claimers, items in
// conversations.
type RaceSize struct {
	Handles, Claimers, Items, Conversations int
}

// FullRace is the size the issue names: 4 handles × 8 claimers, 4,000
// items in 200 conversations.
var FullRace = RaceSize{Handles: 4, Claimers: 8, Items: 4000, Conversations: 200}

// RunRaces checks what only concurrent writers can get wrong: several
// handles on one database (replicas) claiming, renewing and finishing at
// once, and read-modify-writes racing at a quota. SQLite serializes every
// writer, so these pass there by construction; on PostgreSQL they are the
// proof that the locks and SERIALIZABLE retries are right.
func RunRaces(t *testing.T, e Engine, size RaceSize) {
	t.Run("QueueManyClaimers", func(t *testing.T) { queueRace(t, e, size) })
	t.Run("AffinityNoLostUpdate", func(t *testing.T) { affinityRace(t, e) })
	t.Run("PluginStateQuota", func(t *testing.T) { quotaRace(t, e) })
	t.Run("LuaKVQuota", func(t *testing.T) { luaKVQuotaRace(t, e) })
	t.Run("LeaseOneHolder", func(t *testing.T) { leaseRace(t, e) })
	t.Run("ScheduleSyncAtStart", func(t *testing.T) { syncRace(t, e) })
	t.Run("PairingOneCode", func(t *testing.T) { pairingRace(t, e) })
}

// queueRace: producers enqueue each conversation's items in order while
// Handles × Claimers claim and finish them; some claimers stall past their
// lease, lose it, and must change nothing. Checked throughout: never two
// items of one conversation running at one instant (sampled from the
// database); an item is claimed only once every earlier item of its
// conversation is done (enqueue order); no item is finished twice;
// every item is finished.
func queueRace(t *testing.T, e Engine, size RaceSize) {
	// The lease is long enough that a claimer that does not stall never
	// loses one on a loaded machine, short enough for the test.
	const ttl = 4 * time.Second
	handle := e.New(t)
	dbs := make([]*store.DB, size.Handles)
	for i := range dbs {
		dbs[i] = handle(store.Options{LeaseTTL: ttl, Holder: fmt.Sprint("replica-", i)})
	}
	perConv := size.Items / size.Conversations

	var mu sync.Mutex
	finished := map[int64]string{} // item id → who finished it
	var violations []string
	fail := func(format string, a ...any) {
		mu.Lock()
		if len(violations) < 20 {
			violations = append(violations, fmt.Sprintf(format, a...))
		}
		mu.Unlock()
	}

	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	// Producers: two per 10 conversations, enqueueing into the same
	// conversations at once (the order of a conversation is the order its
	// enqueues commit in), interleaved with other conversations'.
	var produced atomic.Int64
	var prodWG sync.WaitGroup
	for p := 0; p < size.Conversations; p += 10 {
		for half := range 2 {
			prodWG.Add(1)
			go func() {
				defer prodWG.Done()
				q := dbs[(p/10*2+half)%len(dbs)]
				for n := half; n < perConv; n += 2 {
					for c := p; c < min(p+10, size.Conversations); c++ {
						cv := conv(fmt.Sprint("race-", c))
						_, dup, err := q.Enqueue(runCtx, msg(cv, fmt.Sprint(n), fmt.Sprint(n)))
						if err != nil || dup {
							fail("enqueue %s #%d: dup %v, %v", cv, n, dup, err)
							return
						}
						produced.Add(1)
					}
				}
			}()
		}
	}

	// A sampler looks at the database: no conversation has two running
	// items at one instant.
	stopSampling := make(chan struct{})
	var sampleWG sync.WaitGroup
	sampleWG.Add(1)
	samples := 0
	go func() {
		defer sampleWG.Done()
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if c, n, err := dbs[0].MostRunningInOneConversation(runCtx); err != nil {
				fail("sample: %v", err)
			} else if n > 1 {
				fail("conversation %s has %d items running at one instant", c, n)
			}
			samples++
		}
	}()

	var done atomic.Int64
	var progressAt atomic.Int64
	progressAt.Store(time.Now().UnixNano())
	lastProgress := func() time.Time { return time.Unix(0, progressAt.Load()) }
	var lost, stalled atomic.Int64
	var claimWG sync.WaitGroup
	for h, q := range dbs {
		for c := 0; c < size.Claimers; c++ {
			claimWG.Add(1)
			go func() {
				defer claimWG.Done()
				rnd := rand.New(rand.NewPCG(uint64(h), uint64(c)))
				who := fmt.Sprintf("%d/%d", h, c)
				for done.Load() < int64(size.Items) && runCtx.Err() == nil && time.Since(lastProgress()) < 20*time.Second {
					claimedAt := time.Now()
					items, _, err := q.Claim(runCtx, 1+rnd.IntN(3), claimedAt)
					if err != nil {
						fail("claim %s: %v", who, err)
						return
					}
					if len(items) == 0 {
						time.Sleep(time.Duration(1+rnd.IntN(5)) * time.Millisecond)
						continue
					}
					// One claim in 100 stalls past its lease before it
					// works: other claimers take its items back, and its
					// finishes must change nothing.
					stall := rnd.IntN(100) == 0
					for _, it := range items {
						// Order: every older item of the conversation is
						// done and no newer one started (a done item stays
						// done, so this holds from the claim on).
						if older, newer, err := q.OrderAt(runCtx, it.ID); err != nil {
							fail("read the order around %d: %v", it.ID, err)
						} else if older != 0 || newer != 0 {
							fail("%s claimed item %d of %s with %d older items not done and %d newer ones started", who, it.ID, it.Conversation, older, newer)
						}
					}
					if stall {
						stalled.Add(1)
						time.Sleep(ttl + time.Second)
					}
					for _, it := range items {
						err := q.Finish(runCtx, it.ID, it.Lease, core.StatusDone, "")
						if errors.Is(err, core.ErrLeaseLost) {
							if !stall {
								cur, st, _ := q.QueueItem(ctx, it.ID)
								fail("%s lost the lease %d of item %d without stalling (%s since the claim); now %s lease %d interruptions %d", who, it.Lease, it.ID, time.Since(claimedAt), st, cur.Lease, cur.Interruptions)
							}
							lost.Add(1)
							continue
						}
						if err != nil {
							fail("finish %d: %v", it.ID, err)
							return
						}
						mu.Lock()
						if by, twice := finished[it.ID]; twice {
							violations = append(violations, fmt.Sprintf("item %d finished twice (%s and %s)", it.ID, by, who))
						}
						finished[it.ID] = who
						mu.Unlock()
						done.Add(1)
						progressAt.Store(time.Now().UnixNano())
					}
				}
			}()
		}
	}
	prodWG.Wait()
	claimWG.Wait()
	close(stopSampling)
	sampleWG.Wait()
	if done.Load() < int64(size.Items) {
		h, err := dbs[0].QueueHealth(ctx, time.Now())
		t.Errorf("the race stopped with %d of %d items done; queue health %+v (%v)", done.Load(), size.Items, h, err)
	}
	for _, v := range violations {
		t.Error(v)
	}
	if produced.Load() != int64(size.Items) || len(finished) != size.Items {
		t.Errorf("%d items enqueued, %d finished; want %d each", produced.Load(), len(finished), size.Items)
	}
	counts, err := dbs[0].QueueCounts(ctx)
	if err != nil || counts[core.StatusDone] != size.Items || counts[core.StatusRunning]+counts[core.StatusQueued] != 0 {
		t.Errorf("queue counts = %v, %v; want every item done", counts, err)
	}
	t.Logf("%d items, %d handles × %d claimers; %d claims stalled past the lease (%d fenced finishes); %d samples",
		size.Items, size.Handles, size.Claimers, stalled.Load(), lost.Load(), samples)
}

// affinityRace: concurrent increments of one affinity row from several
// handles lose nothing.
func affinityRace(t *testing.T, e Engine) {
	handle := e.New(t)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		db := handle(store.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := db.UpdateAffinity(ctx, "code", "fake/big", func(a core.Affinity) core.Affinity {
					a.Positives++
					a.Pos += 0.5
					return a
				})
				if err != nil {
					t.Errorf("writer %d update %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	as, err := handle(store.Options{}).Affinities(ctx)
	if err != nil || len(as) != 1 || as[0].Positives != writers*each || as[0].Pos != writers*each*0.5 {
		t.Fatalf("after %d concurrent increments: %+v, %v", writers*each, as, err)
	}
}

// quotaRace: puts of new keys race at a key quota from several handles:
// exactly the quota's worth succeed, each of them is stored, and the
// usage row agrees with the namespace.
func quotaRace(t *testing.T, e Engine) {
	handle := e.New(t)
	const writers, each, maxKeys = 6, 20, 50
	q := core.PluginStateQuota{MaxKeys: maxKeys, MaxBytes: 1 << 20}
	var ok atomic.Int64
	var wg sync.WaitGroup
	stored := make(chan string, writers*each)
	for w := range writers {
		db := handle(store.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("w%d-k%d", w, i)
				err := db.PluginStatePut(ctx, "racer", key, "value", q)
				switch {
				case err == nil:
					ok.Add(1)
					stored <- key
				case errors.Is(err, core.ErrPluginStateQuota):
				default:
					t.Errorf("put %s: %v", key, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stored)
	db := handle(store.Options{})
	if ok.Load() != maxKeys {
		t.Errorf("%d puts succeeded at a quota of %d keys", ok.Load(), maxKeys)
	}
	for k := range stored {
		if v, found, err := db.PluginStateGet(ctx, "racer", k); err != nil || !found || v != "value" {
			t.Errorf("a put that succeeded is lost: %s = %q %v %v", k, v, found, err)
		}
	}
	keys, err := db.PluginStateKeys(ctx, "racer", "")
	n, bytes, uerr := db.PluginStateUsage(ctx, "racer")
	if err != nil || uerr != nil || len(keys) != maxKeys || n != len(keys) || bytes != int64(len(keys))*int64(len("w0-k0")+len("value"))+int64(countLong(keys)) {
		t.Errorf("namespace has %d keys; usage says %d keys, %d bytes (%v %v)", len(keys), n, bytes, err, uerr)
	}
}

// luaKVQuotaRace: ctx.kv_set of new keys from several replicas races at
// kv_max_keys: exactly the quota's worth succeed, and the usage row
// agrees with the namespace.
func luaKVQuotaRace(t *testing.T, e Engine) {
	handle := e.New(t)
	const writers, each, maxKeys = 6, 20, 50
	q := core.PluginStateQuota{MaxKeys: maxKeys, MaxBytes: 1 << 20}
	var ok atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		db := handle(store.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("w%d-k%d", w, i)
				switch err := db.LuaKVPut(ctx, "racer.lua", key, "value", q); {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, core.ErrLuaKVQuota):
				default:
					t.Errorf("put %s: %v", key, err)
				}
			}
		}()
	}
	wg.Wait()
	db := handle(store.Options{})
	if ok.Load() != maxKeys {
		t.Errorf("%d puts succeeded at a quota of %d keys", ok.Load(), maxKeys)
	}
	if n, _, err := db.LuaKVUsage(ctx, "racer.lua"); err != nil || n != maxKeys {
		t.Errorf("usage says %d keys (%v); want %d", n, err, maxKeys)
	}
}

// countLong counts the keys with a two-digit number (one byte longer).
func countLong(keys []string) int {
	n := 0
	for _, k := range keys {
		if len(k) > len("w0-k0") {
			n++
		}
	}
	return n
}
