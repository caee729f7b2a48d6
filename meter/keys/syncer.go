package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Source is where key and customer states come from, and where their
// changes wait to be published: the ledger (ledger.Store implements it).
type Source interface {
	Loader
	// PublishKeyChanges takes up to max changes from the change outbox,
	// calls publish with the current states of what changed, and removes
	// the changes once publish returns nil. It returns how many it took.
	PublishKeyChanges(ctx context.Context, max int, publish func(context.Context, usage.Changes) error) (int, error)
	// AllKeyStates calls publish with the states of every key and
	// customer, in chunks.
	AllKeyStates(ctx context.Context, publish func(context.Context, usage.Changes) error) error
	// KeyChangePending reports whether the change seq, or one before it,
	// is still to publish.
	KeyChangePending(ctx context.Context, seq int64) (bool, error)
	// LastKeyChange returns the last change's seq (0: none pending).
	LastKeyChange(ctx context.Context) (int64, error)
	// KeySyncEpoch returns the identity of the source's states.
	KeySyncEpoch(ctx context.Context) (string, error)
	// ListenKeyChanges calls wake when changes commit, until ctx ends or
	// its connection fails.
	ListenKeyChanges(ctx context.Context, wake func()) error
}

// Settings of the Syncer.
const (
	// changeBatch is how many outbox changes one publication takes.
	changeBatch = 1000
	// pollInterval is how often the outbox is read without a wake-up (the
	// listening connection may be down): the one cost of a quiet system.
	pollInterval = time.Second
	// markInterval is how often the bucket's sync mark is checked.
	markInterval = 30 * time.Second
	// putWorkers is how many states are put into a bucket at once.
	putWorkers = 16
	// syncMark is the keys bucket's entry that says which source's states
	// it holds (not a key hash: gateways skip it).
	syncMark = "_sync"
)

// Syncer pushes key and customer states from the Source to the buckets:
// every change as it commits (woken by the source, or every pollInterval),
// and every state at start, or when the bucket lost its mark (a bucket
// recreated, or filled from another database). Several Syncers (one per
// meter or admin process) share the work safely: each change is taken by
// one, and a bucket entry is never replaced by an older state.
type Syncer struct {
	src  Source
	open func(context.Context) (Buckets, error)
	b    Buckets    // once open
	pub  *Publisher // once open
	log  *slog.Logger
	id   string // names this Syncer in the full sync's lease

	wake chan struct{}

	mu       sync.Mutex
	passDone chan struct{} // closed at the end of each pass over the outbox

	fullSyncs atomic.Int64 // full syncs done, for tests and metrics
	published atomic.Int64 // states published

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	wg                  sync.WaitGroup
}

// NewSyncer returns a Syncer from src into the buckets open returns
// (EnsureBuckets, tried again every second until it succeeds).
func NewSyncer(src Source, open func(context.Context) (Buckets, error), log *slog.Logger) *Syncer {
	return &Syncer{src: src, open: open, log: log, id: newSyncerID(), wake: make(chan struct{}, 1), passDone: make(chan struct{})}
}

// Start starts publishing in the background until Stop: once the buckets
// are open it checks their mark (syncing every state when it is missing or
// another source's), then publishes each change. Calling it again does
// nothing.
func (s *Syncer) Start() {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		s.wg.Go(func() { s.listen(ctx) })
		s.wg.Go(func() { s.run(ctx) })
	})
}

// Stop stops publishing and waits for it until ctx ends. It is idempotent
// and safe on a Syncer never started.
func (s *Syncer) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.startOnce.Do(func() {})
		if s.cancel != nil {
			s.cancel()
		}
	})
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait returns once the change seq (from the ledger's Key.Change), and
// every change before it, is in the buckets, publishing it at once; or ctx's error when that takes
// longer (NATS unreachable, say). seq 0 returns at once.
func (s *Syncer) Wait(ctx context.Context, seq int64) error {
	if seq == 0 {
		return nil
	}
	for {
		s.mu.Lock()
		done := s.passDone
		s.mu.Unlock()
		s.poke()
		select {
		case <-done:
		case <-time.After(5 * time.Millisecond): // another Syncer may have published it
		case <-ctx.Done():
			return fmt.Errorf("key change %d not yet published: %w", seq, ctx.Err())
		}
		pending, err := s.src.KeyChangePending(ctx, seq)
		if err != nil {
			return fmt.Errorf("key change %d: %w", seq, err)
		}
		if !pending {
			return nil
		}
		// Another Syncer holds it, or the pass failed: try again shortly.
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("key change %d not yet published: %w", seq, ctx.Err())
		}
	}
}

// Sync returns once every change committed before it was called is in
// the buckets, or ctx's error.
func (s *Syncer) Sync(ctx context.Context) error {
	seq, err := s.src.LastKeyChange(ctx)
	if err != nil {
		return fmt.Errorf("key sync: %w", err)
	}
	return s.Wait(ctx, seq)
}

// FullSyncs is how many full syncs the Syncer has done.
func (s *Syncer) FullSyncs() int64 { return s.fullSyncs.Load() }

// Published is how many states the Syncer has published.
func (s *Syncer) Published() int64 { return s.published.Load() }

func (s *Syncer) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// listen keeps a connection listening for the source's changes, set up
// again a second after a failure. A run of failures (Postgres down) is
// logged once at WARN, then at DEBUG until a connection has listened for
// a while (an observability review: one line a second for an outage).
func (s *Syncer) listen(ctx context.Context) {
	failing := false
	for ctx.Err() == nil {
		began := time.Now()
		err := s.src.ListenKeyChanges(ctx, s.poke)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > 5*time.Second {
			failing = false // it was listening: this is a new failure
		}
		level := slog.LevelWarn
		if failing {
			level = slog.LevelDebug
		}
		s.log.Log(ctx, level, "key sync: listening for changes failed; polling until it is back", "err", err)
		failing = true
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// run publishes the outbox on each wake-up and every pollInterval, once
// the buckets are open; the mark is kept beside it (keepMark), so that a
// full sync never holds the changes back.
func (s *Syncer) run(ctx context.Context) {
	if !s.ready(ctx) {
		return
	}
	s.wg.Go(func() { s.keepMark(ctx) })
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	failing := false
	for {
		err := s.pass(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			s.log.Warn("key sync: publishing changes failed; retrying", "err", err)
		case err == nil && failing:
			s.log.Info("key sync: publishing changes again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-poll.C:
		}
	}
}

// keepMark checks the bucket's mark at once, then every markInterval,
// syncing every state when it is missing or another source's; while
// another Syncer holds the full sync's lease, or a check fails, it checks
// again every second.
func (s *Syncer) keepMark(ctx context.Context) {
	failing := false
	for {
		wait := markInterval
		err := s.checkMark(ctx)
		switch {
		case errors.Is(err, errSyncElsewhere):
			wait = time.Second
		case err != nil && ctx.Err() == nil:
			if !failing {
				s.log.Warn("key sync: checking the bucket's mark failed; retrying", "err", err)
			}
			failing, wait = true, time.Second
		default:
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// ready opens the buckets, trying again every second; false when ctx
// ended first.
func (s *Syncer) ready(ctx context.Context) bool {
	for tries := 0; ; tries++ {
		b, err := s.open(ctx)
		if err == nil {
			s.b, s.pub = b, NewPublisher(b, s.log)
			return true
		}
		if tries == 0 && ctx.Err() == nil {
			s.log.Warn("key sync: the key buckets are not reachable; changes wait in the ledger's outbox", "err", err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

// pass publishes every change in the outbox, then tells the waiters.
func (s *Syncer) pass(ctx context.Context) error {
	defer func() {
		s.mu.Lock()
		close(s.passDone)
		s.passDone = make(chan struct{})
		s.mu.Unlock()
	}()
	for {
		n, err := s.src.PublishKeyChanges(ctx, changeBatch, s.publish)
		if err != nil || n < changeBatch {
			return err
		}
	}
}

// publish puts states into the buckets, putWorkers at a time, each under
// the Publisher's version check.
func (s *Syncer) publish(ctx context.Context, c usage.Changes) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(putWorkers)
	for _, k := range c.Keys {
		g.Go(func() error { return s.pub.PutKey(gctx, k.Hash, k.State) })
	}
	for _, cu := range c.Customers {
		g.Go(func() error { return s.pub.PutCustomer(gctx, cu.CustomerID, cu.State) })
	}
	for _, mp := range c.Prices {
		g.Go(func() error { return s.pub.PutPrices(gctx, mp) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	s.published.Add(int64(c.Len()))
	return nil
}

// mark is the value of the sync mark.
type mark struct {
	Epoch    string    `json:"epoch"`
	SyncedAt time.Time `json:"synced_at"`
	// Format is the stateFormat of the full sync that wrote the mark
	// (absent: 1).
	Format int `json:"format,omitempty"`
}

// stateFormat numbers the shape of the published states. It goes up when
// a field the gateways act on is added (2: a key's spend_limited and
// currency, a customer's credit_limited), so that the first syncer of a
// new release publishes every state again, rather than leaving older ones
// without the field. It is a member of the mark of its own, not a part of
// the epoch: a syncer of the release before reads only the epoch, and so
// does not take a newer release's mark for another database's and sync
// in full in turn, undoing the newer sync while both run (a rolling
// upgrade). What such a syncer still publishes, a changed key's state in
// the old shape, the gateways read again from the ledger (Cache.LookupKey).
const stateFormat = 2

// checkMark syncs every state when the bucket's mark is missing or names
// another source, under the full sync's lease: errSyncElsewhere when
// another Syncer holds it.
func (s *Syncer) checkMark(ctx context.Context) error {
	epoch, err := s.src.KeySyncEpoch(ctx)
	if err != nil {
		return err
	}
	if ok, err := s.marked(ctx, epoch); ok || err != nil {
		return err
	}
	rev, ok, err := s.acquireLease(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errSyncElsewhere
	}
	lctx, cancel := context.WithCancel(ctx)
	var held sync.WaitGroup
	held.Go(func() { s.holdLease(lctx, rev, cancel) })
	defer held.Wait()
	defer cancel()
	if ok, err := s.marked(lctx, epoch); ok || err != nil { // synced by the lease's last holder
		return err
	}
	return s.fullSync(lctx, epoch)
}

// marked reports whether the bucket's mark names epoch.
func (s *Syncer) marked(ctx context.Context, epoch string) (bool, error) {
	e, err := s.b.Keys.Get(ctx, syncMark)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("key sync: read the mark: %w", err)
	}
	var m mark
	return json.Unmarshal(e.Value(), &m) == nil && m.Epoch == epoch && m.Format >= stateFormat, nil
}

// fullSync publishes every state and marks the bucket with epoch. The
// states go pipelined, each created only if absent; one that exists
// (published meanwhile from the outbox, or by an earlier sync) is put
// under the version check. When the bucket held states already, the
// entries of keys the source does not have are deleted after.
func (s *Syncer) fullSync(ctx context.Context, epoch string) error {
	start := time.Now()
	status, err := s.b.Keys.Status(ctx)
	if err != nil {
		return fmt.Errorf("key sync: bucket status: %w", err)
	}
	empty := status.Values() <= 1 // the lease, ours, besides
	s.log.Info("key sync: publishing every key's state", "bucket_empty", empty)
	var seen map[string]struct{}
	if !empty {
		seen = map[string]struct{}{}
	}
	n := 0
	err = s.src.AllKeyStates(ctx, func(ctx context.Context, c usage.Changes) error {
		n += c.Len()
		for _, k := range c.Keys {
			if seen != nil {
				seen[k.Hash] = struct{}{}
			}
		}
		return s.create(ctx, c)
	})
	if err != nil {
		return fmt.Errorf("key sync: %w", err)
	}
	if !empty {
		if err := s.deleteUnknown(ctx, seen); err != nil {
			return err
		}
	}
	data, _ := json.Marshal(mark{Epoch: epoch, SyncedAt: time.Now().UTC(), Format: stateFormat})
	if _, err := s.b.Keys.Put(ctx, syncMark, data); err != nil {
		return fmt.Errorf("key sync: write the mark: %w", err)
	}
	s.fullSyncs.Add(1)
	s.log.Info("key sync: every state published", "states", n, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// createWindow bounds the states create has published and not yet seen
// acknowledged: below nats.go's async limit (4,000 by default), so that a
// server slow to acknowledge (a loaded machine) slows the sync down
// instead of failing it with "stalled with too many outstanding async
// published messages" and starting it over.
const createWindow = 1024

// create publishes states pipelined, each only where its entry is absent;
// one that exists (published meanwhile) is put under the version check,
// and one too big for a message (tooBig) by the Publisher, smaller.
func (s *Syncer) create(ctx context.Context, c usage.Changes) error {
	type put struct {
		kv  jetstream.KeyValue
		key string
		ack jetstream.PubAckFuture
		put func(context.Context) error
	}
	puts := make([]put, 0, createWindow)
	settle := func(p put) error {
		select {
		case <-p.ack.Ok():
			return nil
		case err := <-p.ack.Err():
			if !isWrongRevision(err) && !tooBig(err) {
				return fmt.Errorf("publish %s %s: %w", p.kv.Bucket(), p.key, err)
			}
			return p.put(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	drain := func() error {
		for _, p := range puts {
			if err := settle(p); err != nil {
				return err
			}
		}
		puts = puts[:0]
		return nil
	}
	send := func(kv jetstream.KeyValue, key string, v any, fallback func(context.Context) error) error {
		if len(puts) == createWindow {
			if err := drain(); err != nil {
				return err
			}
		}
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		ack, err := s.b.js.PublishAsync("$KV."+kv.Bucket()+"."+key, data, jetstream.WithExpectLastSequencePerSubject(0),
			jetstream.WithStallWait(10*time.Second))
		if tooBig(err) {
			return fallback(ctx) // published smaller
		} else if err != nil {
			return fmt.Errorf("publish %s %s: %w", kv.Bucket(), key, err)
		}
		puts = append(puts, put{kv, key, ack, fallback})
		return nil
	}
	for _, k := range c.Keys {
		if err := send(s.b.Keys, k.Hash, k.State, func(ctx context.Context) error { return s.pub.PutKey(ctx, k.Hash, k.State) }); err != nil {
			return err
		}
	}
	for _, cu := range c.Customers {
		if err := send(s.b.Customers, cu.CustomerID, cu.State, func(ctx context.Context) error {
			return s.pub.PutCustomer(ctx, cu.CustomerID, cu.State)
		}); err != nil {
			return err
		}
	}
	for _, mp := range c.Prices {
		if err := send(s.b.Prices, PriceKey(mp.Model), mp, func(ctx context.Context) error { return s.pub.PutPrices(ctx, mp) }); err != nil {
			return err
		}
	}
	if err := drain(); err != nil {
		return err
	}
	s.published.Add(int64(c.Len()))
	return nil
}

// deleteUnknown deletes the keys bucket's entries of keys the source did
// not publish in a full sync (seen): states from another database, or of
// keys that no longer exist.
func (s *Syncer) deleteUnknown(ctx context.Context, seen map[string]struct{}) error {
	lister, err := s.b.Keys.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		return fmt.Errorf("key sync: list the bucket: %w", err)
	}
	defer lister.Stop()
	deleted := 0
	for k := range lister.Keys() {
		if _, ok := seen[k]; ok || k == syncMark || k == syncLease {
			continue
		}
		if err := s.b.Keys.Delete(ctx, k); err != nil {
			return fmt.Errorf("key sync: delete %s: %w", k, err)
		}
		deleted++
	}
	if deleted > 0 {
		s.log.Warn("key sync: deleted the states of keys the ledger does not have", "keys", deleted)
	}
	return nil
}
