package keys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Loader reads one key's state from the source (the ledger), for a key the
// cache does not know yet.
type Loader interface {
	// KeyState returns the state of the active key whose secret hashes to
	// hash (usage.KeyHash) and of its customer, ok=false when there is no
	// such key or it is revoked, or an error when the source cannot be read.
	KeyState(ctx context.Context, hash string) (k usage.KeyState, c usage.CustomerState, ok bool, err error)
}

// Settings of the lookup of keys the cache does not know.
const (
	// missRate and missBurst bound the lookups of unknown keys that reach
	// the source, per second, whatever the traffic of bad keys.
	missRate  = 50
	missBurst = 100
	// negativeTTL is how long a key the source does not know stays
	// unknown without asking again.
	negativeTTL = 2 * time.Second
	// maxNegative bounds the negative cache, in keys.
	maxNegative = 100_000
)

// Cache is a gateway's view of every active key and every customer's
// budget state, kept current by watching the buckets: a change is applied
// within milliseconds of its publication, and the view survives a Postgres
// or NATS outage as it was. Lookups never wait on the network, but for a
// key the cache does not know, which is looked up once in the Loader.
type Cache struct {
	open   func(context.Context) (Buckets, error)
	loader Loader
	log    *slog.Logger

	mu       sync.RWMutex
	keys     *table
	prices   map[string]usage.ModelPrices // by model
	negative map[[32]byte]int64           // key hash → until, Unix nanoseconds
	// onKey and onCustomer, when set (WatchStates), are told of each newer
	// state applied (c.mu).
	onKey, onCustomer func(id string, version int64)

	misses  *rate.Limiter
	flight  singleflight.Group
	applied atomic.Int64 // changes applied, for tests and metrics
	// buckets, once open; revs, the last revision applied of each (keys,
	// customers, prices).
	buckets atomic.Pointer[Buckets]
	revs    [3]atomic.Uint64

	startOnce, stopOnce sync.Once
	loaded              chan struct{} // closed once both buckets' initial values are in
	cancel              context.CancelFunc
	done                chan struct{}
}

// customer is one customer's budget state and overrides, shared by its
// keys.
type customer struct {
	id            string
	blocked       string
	creditLimited bool
	// creditLeft is what the customer may still spend, in micro-units
	// (usage.CustomerState.CreditLeftMicros), when hasCreditLeft.
	creditLeft    int64
	hasCreditLeft bool
	overrides     []usage.Override
	version       int64
}

// NewCache returns a Cache over the buckets open returns (EnsureBuckets,
// tried again every second until it succeeds: NATS may be down when the
// gateway starts), looking keys it does not know up in loader (nil: none).
func NewCache(open func(context.Context) (Buckets, error), loader Loader, log *slog.Logger) *Cache {
	return &Cache{open: open, loader: loader, log: log, keys: newTable(), prices: map[string]usage.ModelPrices{},
		negative: map[[32]byte]int64{}, misses: rate.NewLimiter(missRate, missBurst),
		loaded: make(chan struct{}), done: make(chan struct{})}
}

// Start starts watching the buckets and returns once their current values
// are loaded, or ctx's error (the watch goes on: Loaded says when it is
// done). Calling it again does nothing.
func (c *Cache) Start(ctx context.Context) error {
	c.startOnce.Do(func() {
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c.cancel = cancel
		go func() {
			defer close(c.done)
			c.watch(wctx)
		}()
	})
	select {
	case <-c.loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("key cache: initial load: %w", ctx.Err())
	}
}

// Stop stops watching and waits for it until ctx ends. It is idempotent
// and safe on a Cache never started.
func (c *Cache) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		c.startOnce.Do(func() { close(c.done) })
		if c.cancel != nil {
			c.cancel()
		}
	})
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Loaded reports whether the buckets' values at start are loaded.
func (c *Cache) Loaded() bool {
	select {
	case <-c.loaded:
		return true
	default:
		return false
	}
}

// CatchUp returns once the cache has applied every change the buckets
// held when it was called, or ctx's error.
func (c *Cache) CatchUp(ctx context.Context) error {
	b := c.buckets.Load()
	if b == nil {
		return errors.New("key cache: the buckets are not open yet")
	}
	for i, kv := range []jetstream.KeyValue{b.Keys, b.Customers, b.Prices} {
		st, err := kv.Status(ctx)
		if err != nil {
			return fmt.Errorf("key cache: %w", err)
		}
		bs, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok {
			return fmt.Errorf("key cache: bucket %s: no stream state", kv.Bucket())
		}
		last := bs.StreamInfo().State.LastSeq
		for c.revs[i].Load() < last {
			select {
			case <-ctx.Done():
				return fmt.Errorf("key cache: catching up with %s: %w", kv.Bucket(), ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

// Len is the number of keys held (revoked keys' tombstones included).
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.keys.len()
}

// watch applies the buckets' values, then their changes, until ctx ends;
// a watcher that fails is set up again (JetStream resumes it).
func (c *Cache) watch(ctx context.Context) {
	var b Buckets
	for tries := 0; ; tries++ {
		var err error
		if b, err = c.open(ctx); err == nil {
			break
		}
		if tries == 0 {
			c.log.Warn("key cache: opening the key buckets; unknown keys are looked up in the ledger meanwhile", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	c.buckets.Store(&b)
	var wg sync.WaitGroup
	followers := []struct {
		kv    jetstream.KeyValue
		apply func(jetstream.KeyValueEntry)
	}{{b.Keys, c.applyKey}, {b.Customers, c.applyCustomer}, {b.Prices, c.applyPrices}}
	loaded := make([]chan struct{}, len(followers))
	for i, f := range followers {
		loaded[i] = make(chan struct{})
		var once sync.Once
		wg.Go(func() { c.follow(ctx, f.kv, &c.revs[i], f.apply, func() { once.Do(func() { close(loaded[i]) }) }) })
	}
	wg.Go(func() { // Loaded once every bucket's initial values are in
		for _, ch := range loaded {
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
		close(c.loaded)
	})
	wg.Wait()
}

// follow watches one bucket until ctx ends, calling apply for each entry
// and caughtUp once the initial values are in. A watch that cannot be set
// up (the bucket's stream gone, NATS away) is tried again every second,
// and logged once per run of failures, at WARN, then once more when it
// is set up again: one line a second for each bucket, for as long as the
// stream was gone, told an operator nothing more.
func (c *Cache) follow(ctx context.Context, kv jetstream.KeyValue, rev *atomic.Uint64, apply func(jetstream.KeyValueEntry), caughtUp func()) {
	failures := 0 // since the watch was last set up
	for ctx.Err() == nil {
		// Every message of the stream, in order, rather than the last
		// per subject: the same values in a bucket of one value per
		// entry (and the same end state in one with history), but a
		// consumer the server creates at once, where the last per
		// subject of a million subjects took it past the client's 5 s
		// timeout on a loaded machine, attempt after attempt.
		w, err := kv.WatchAll(ctx, jetstream.IncludeHistory())
		if err != nil {
			if failures++; failures == 1 && ctx.Err() == nil {
				c.log.Warn("key cache: watch", "bucket", kv.Bucket(), "err", err,
					"then", "tried again every second; the cache keeps the values it holds, and unknown keys are looked up in the ledger")
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if failures > 0 {
			c.log.Info("key cache: watching again", "bucket", kv.Bucket(), "failed_tries", failures)
			failures = 0
		}
		for e := range w.Updates() {
			if e == nil {
				caughtUp()
				continue
			}
			apply(e)
			rev.Store(e.Revision())
			c.applied.Add(1)
		}
		_ = w.Stop()
	}
}

func (c *Cache) applyKey(e jetstream.KeyValueEntry) {
	hash, err := hex.DecodeString(e.Key())
	if err != nil || len(hash) != 32 {
		return
	}
	h := [32]byte(hash)
	if e.Operation() != jetstream.KeyValuePut {
		c.mu.Lock()
		c.keys.delete(h)
		c.mu.Unlock()
		return
	}
	var s usage.KeyState
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		c.log.Warn("key cache: unreadable key state", "err", err)
		return
	}
	c.setKey(h, s)
}

// setKey applies a key's state unless the one held is newer. A revoked
// key's state stays as a tombstone: a lookup in the Loader that raced with
// the revocation cannot bring the key back with an older state.
func (c *Cache) setKey(h [32]byte, s usage.KeyState) {
	c.mu.Lock()
	if old := c.keys.get(h); old != nil && old.version >= s.Version {
		c.mu.Unlock()
		return
	}
	c.keys.set(h, c.keys.row(s))
	c.keys.setSpend(h, &s)
	delete(c.negative, h)
	watch := c.onKey
	c.mu.Unlock()
	if watch != nil && s.KeyID != "" {
		watch(s.KeyID, s.Version)
	}
}

// WatchStates has key called with the key id and Version of each newer key
// state the cache applies, and customer with the customer id and Version
// of each newer customer state, after it is applied (gateway.StateWatcher).
func (c *Cache) WatchStates(key, customer func(id string, version int64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onKey, c.onCustomer = key, customer
}

// customerLocked returns the customer record of id, made when new (c.mu held).
func (c *Cache) customerLocked(id string) *customer {
	return c.keys.customers[c.keys.customer(id)]
}

func (c *Cache) applyCustomer(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		return
	}
	var s struct {
		usage.CustomerState
		CreditLimited *bool `json:"credit_limited"` // nil: an older release's state, without it
	}
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		c.log.Warn("key cache: unreadable customer state", "err", err)
		return
	}
	if s.CreditLimited != nil {
		s.CustomerState.CreditLimited = *s.CreditLimited
	}
	c.setCustomer(e.Key(), s.CustomerState, s.CreditLimited != nil)
}

// setCustomer applies a customer's state unless the one held is newer. A
// state without credit_limited (withCredit false: published by a release
// before it, during a rolling upgrade) keeps the credit limit the cache
// knew: it can neither lift the currency rule from the customer's keys
// nor, until a state that says so, put it back.
func (c *Cache) setCustomer(id string, s usage.CustomerState, withCredit bool) {
	c.mu.Lock()
	cu := c.customerLocked(id)
	if cu.version >= s.Version {
		c.mu.Unlock()
		return
	}
	cu.blocked, cu.overrides, cu.version = s.Blocked, s.Overrides, s.Version
	if withCredit {
		cu.creditLimited = s.CreditLimited
	}
	cu.hasCreditLeft = s.CreditLeftMicros != nil
	if cu.hasCreditLeft {
		cu.creditLeft = *s.CreditLeftMicros
	}
	watch := c.onCustomer
	c.mu.Unlock()
	if watch != nil {
		watch(id, s.Version)
	}
}

func (c *Cache) applyPrices(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		return
	}
	var s usage.ModelPrices
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		c.log.Warn("key cache: unreadable prices", "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.prices[s.Model]; !ok || old.Version < s.Version {
		c.prices[s.Model] = s
	}
}

// Rate rates a request's event as the ledger will (usage.RateEvent), with
// the price book and the customer's overrides the cache holds; ok=false
// when it cannot (the cost then stays unshown, never guessed), and until
// the buckets' values at start are loaded (Loaded): an empty price book
// would call every model unpriced; nor for a model whose prices were
// withheld as too big to publish (usage.ModelPrices.Withheld). A price
// changed in the meantime makes the ledger's charge differ: the ledger's
// is the one billed.
func (c *Cache) Rate(e *usage.Event) (usage.Rating, bool) {
	if !c.Loaded() {
		return usage.Rating{}, false
	}
	c.mu.RLock()
	mp := c.prices[e.Model]
	var overrides []usage.Override
	if n, ok := c.keys.customerNum[e.CustomerID]; ok {
		overrides = c.keys.customers[n].overrides
	}
	c.mu.RUnlock()
	if mp.Withheld != "" {
		return usage.Rating{}, false
	}
	r, err := usage.RateEvent(e, mp.Versions, overrides)
	return r, err == nil
}

// LookupKey returns the state of an active key secret, with its
// customer's budget state folded into Blocked and SpendLimited, or
// ok=false for an unknown or revoked one. A key the cache does not know,
// or holds as an older release published it (without Currency), is looked
// up in the Loader (at most missRate a second overall, once per key at a
// time, and not again within negativeTTL when the source does not know it
// either).
func (c *Cache) LookupKey(secret string) (usage.KeyState, bool) {
	h := hashOf(secret)
	c.mu.RLock()
	r := c.keys.get(h)
	var s usage.KeyState
	if r != nil && !r.revoked {
		s = c.keys.state(h, r)
	}
	known, revoked := r != nil, r != nil && r.revoked
	c.mu.RUnlock()
	switch {
	case !known:
		return c.miss(h)
	case revoked:
		return usage.KeyState{}, false
	case s.Currency == "":
		// Published by a release before Currency and SpendLimited (a
		// syncer not yet upgraded): read from the source, whose newer
		// state then replaces it; as it is when the source cannot say.
		if fresh, ok := c.miss(h); ok {
			return fresh, true
		}
	}
	return s, true
}

// miss looks a key the cache does not hold up in the loader.
func (c *Cache) miss(h [32]byte) (usage.KeyState, bool) {
	if c.loader == nil {
		return usage.KeyState{}, false
	}
	c.mu.RLock()
	until, negative := c.negative[h]
	c.mu.RUnlock()
	if negative && time.Now().UnixNano() < until {
		return usage.KeyState{}, false
	}
	hash := hex.EncodeToString(h[:])
	v, _, _ := c.flight.Do(hash, func() (any, error) {
		if !c.misses.Allow() {
			return nil, errors.New("rate limited")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		k, cu, ok, err := c.loader.KeyState(ctx, hash)
		if err != nil {
			c.log.Warn("key cache: looking up an unknown key", "err", err)
			return nil, err
		}
		if !ok {
			c.mu.Lock()
			if len(c.negative) >= maxNegative {
				for k := range c.negative { // drop one at random
					delete(c.negative, k)
					break
				}
			}
			c.negative[h] = time.Now().Add(negativeTTL).UnixNano()
			c.mu.Unlock()
			return nil, nil
		}
		c.setCustomer(k.CustomerID, cu, true)
		c.setKey(h, k)
		return true, nil
	})
	if v == nil {
		return usage.KeyState{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if r := c.keys.get(h); r != nil && !r.revoked {
		return c.keys.state(h, r), true
	}
	return usage.KeyState{}, false
}

func hashOf(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }
