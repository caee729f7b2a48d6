package keys_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/keys"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// rig is a ledger, a JetStream server, and helpers to start syncers and
// gateways' caches on them.
type rig struct {
	t     testing.TB
	store *ledger.Store
	js    jetstream.JetStream
}

func newRig(t *testing.T) *rig {
	t.Helper()
	t.Parallel()
	return rigFor(t)
}

func rigFor(t testing.TB) *rig {
	return &rig{t: t, store: ledgertest.NewStore(t), js: metertest.Connect(t, metertest.NewServer(t))}
}

func (r *rig) open(ctx context.Context) (keys.Buckets, error) {
	return keys.EnsureBuckets(ctx, r.js, 1)
}

func (r *rig) syncer() *keys.Syncer {
	s := keys.NewSyncer(r.store, r.open, slog.Default())
	s.Start()
	r.t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// customerWithKeys creates a customer and n keys of it in the ledger,
// and returns the keys' secrets.
func (r *rig) customerWithKeys(n int) []string {
	r.t.Helper()
	ctx := context.Background()
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		r.t.Fatal(err)
	}
	secrets := make([]string, n)
	for i := range secrets {
		if _, secrets[i], err = r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"}); err != nil {
			r.t.Fatal(err)
		}
	}
	return secrets
}

// oneKey creates a customer and one key of it in the ledger, and returns
// the key and its secret.
func (r *rig) oneKey() (ledger.Key, string) {
	r.t.Helper()
	ctx := context.Background()
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		r.t.Fatal(err)
	}
	k, secret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		r.t.Fatal(err)
	}
	return k, secret
}

// cache starts a gateway's key cache; loader may be nil.
func (r *rig) cache(loader keys.Loader) *keys.Cache {
	c := keys.NewCache(r.open, loader, slog.Default())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// eventually fails the test unless ok holds within d.
func eventually(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKeyChangesReachEveryGateway: a key works on two gateways' caches
// once its creation has returned (the call waits for its publication),
// its limits change and its revocation land on both, and a budget flip
// committed by the meter reaches them the same way. (How fast is measured
// by BenchmarkPropagation, not asserted here.)
func TestKeyChangesReachEveryGateway(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sync := r.syncer()
	a, b := r.cache(nil), r.cache(nil) // no loader: only what is pushed
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme", CreditLimit: new("0")})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k", RPMLimit: new(int64(10))})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sync.Wait(wctx, k.Change); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*keys.Cache{a, b} {
		eventually(t, 5*time.Second, "the new key on every gateway", func() bool {
			st, ok := g.LookupKey(secret)
			return ok && st.KeyID == k.ID && st.RPMLimit == 10
		})
	}
	// The customer has a credit limit of 0 and no credit: blocked.
	st, _ := a.LookupKey(secret)
	if st.Blocked == "" {
		t.Fatalf("a prepaid customer without credit: %+v; want blocked", st)
	}
	e, err := r.store.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "1"})
	if err != nil {
		t.Fatal(err)
	}
	_ = e
	for _, g := range []*keys.Cache{a, b} {
		eventually(t, 5*time.Second, "the credit unblocks the key", func() bool {
			st, _ := g.LookupKey(secret)
			return st.Blocked == ""
		})
	}
	k, err = r.store.UpdateKey(ctx, k.ID, ledger.KeyPatch{AllowedModels: ledger.Of([]string{"gpt-4o"}), RPMLimit: ledger.Optional[int64]{Set: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*keys.Cache{a, b} {
		eventually(t, 5*time.Second, "the patch on every gateway", func() bool {
			st, _ := g.LookupKey(secret)
			return st.RPMLimit == 0 && len(st.AllowedModels) == 1
		})
	}
	if _, err := r.store.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*keys.Cache{a, b} {
		eventually(t, 5*time.Second, "the revocation on every gateway", func() bool {
			_, ok := g.LookupKey(secret)
			return !ok
		})
	}
	// The meter's batch that spends the credit flips the customer.
	k2, secret2, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "2000000", Output: "0",
		EffectiveFrom: time.Now().AddDate(0, -1, 0)}); err != nil {
		t.Fatal(err)
	}
	ev := usage.Event{Version: usage.SchemaVersion, ID: "0b8a4a0e-2b8f-4d6e-9a55-5d1c2f3b7a10", Time: time.Now(), CustomerID: c.ID,
		KeyID: k2.ID, Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK, HTTPStatus: 200,
		Usage: usage.Tokens{PromptTokens: 1}, UsageSource: usage.SourceUpstream} // 2 USD
	if _, err := r.store.WriteEvents(ctx, []usage.Event{ev}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*keys.Cache{a, b} {
		eventually(t, 5*time.Second, "the meter's flip on every gateway", func() bool {
			st, ok := g.LookupKey(secret2)
			return ok && st.Blocked != ""
		})
	}
}

// countingLoader counts the lookups that reach the ledger.
type countingLoader struct {
	keys.Loader
	n atomic.Int64
}

func (l *countingLoader) KeyState(ctx context.Context, hash string) (usage.KeyState, usage.CustomerState, bool, error) {
	l.n.Add(1)
	return l.Loader.KeyState(ctx, hash)
}

// TestUnknownKeysAreLookedUpOnceAndBounded: with nothing pushed (no
// syncer), a key is looked up in the ledger once and then held; a flood of
// one bad key reaches the ledger once per negative TTL; a flood of
// distinct bad keys at most at the miss rate.
func TestUnknownKeysAreLookedUpOnceAndBounded(t *testing.T) {
	r := newRig(t)
	l := &countingLoader{Loader: r.store}
	g := r.cache(l)
	k, secret := r.oneKey()
	for range 100 {
		if st, ok := g.LookupKey(secret); !ok || st.KeyID != k.ID {
			t.Fatalf("LookupKey = %+v, %v", st, ok)
		}
	}
	if n := l.n.Load(); n != 1 {
		t.Fatalf("100 lookups of a new key reached the ledger %d times; want 1", n)
	}
	for range 1000 {
		if _, ok := g.LookupKey("tg-bad"); ok {
			t.Fatal("a bad key was found")
		}
	}
	if n := l.n.Load(); n != 2 {
		t.Fatalf("1000 lookups of one bad key reached the ledger %d times in all; want 2", n)
	}
	start := time.Now()
	for i := range 5000 {
		g.LookupKey("tg-bad-" + string(rune('a'+i%26)) + time.Now().String())
	}
	limit := int64(100 + 50*time.Since(start).Seconds() + 2) // burst + rate × time
	if n := l.n.Load() - 2; n > limit {
		t.Fatalf("5000 distinct bad keys reached the ledger %d times; want at most %d", n, limit)
	}
}

// TestRevocationWinsOverARacingLookup: a lookup of the ledger that read a
// key before its revocation cannot bring it back once the revocation is
// in.
func TestRevocationWinsOverARacingLookup(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	_, secret := r.oneKey()
	old, oldCustomer, ok, err := r.store.KeyState(ctx, usage.KeyHash(secret)) // read before the revocation
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	stale := &staleLoader{k: old, c: oldCustomer}
	sync := r.syncer()
	g := r.cache(stale)
	k, err := r.store.RevokeKey(ctx, old.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sync.Wait(wctx, k.Change); err != nil {
		t.Fatal(err)
	}
	// The revocation applied: waiting for the cache to hold one key was
	// not enough, since the syncer's first publish of every key (the key
	// still active) satisfied it too, and the test then failed on a loaded
	// machine without any stale lookup (CI, 2026-12-02).
	if err := g.CatchUp(wctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.LookupKey(secret); ok {
		t.Fatal("a stale lookup brought a revoked key back")
	}
}

// staleLoader answers with a state read earlier.
type staleLoader struct {
	k usage.KeyState
	c usage.CustomerState
}

func (l *staleLoader) KeyState(context.Context, string) (usage.KeyState, usage.CustomerState, bool, error) {
	return l.k, l.c, true, nil
}

// TestFullSyncReplacesAnotherDatabasesStates: a bucket marked by another
// database (or not at all) is synced in full: its keys the ledger does not
// have are deleted, and the ledger's are all there.
func TestFullSyncReplacesAnotherDatabasesStates(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	foreign := usage.KeyHash("tg-from-another-database")
	data, _ := json.Marshal(usage.KeyState{KeyID: "00000000-0000-0000-0000-000000000001", CustomerID: "00000000-0000-0000-0000-000000000002", Version: 1})
	if _, err := b.Keys.Put(ctx, foreign, data); err != nil {
		t.Fatal(err)
	}
	secrets := r.customerWithKeys(25)
	s := r.syncer()
	eventually(t, 10*time.Second, "a full sync", func() bool { return s.FullSyncs() == 1 })
	if _, err := b.Keys.Get(ctx, foreign); err == nil {
		t.Fatal("another database's key survived the full sync")
	}
	g := r.cache(nil)
	for _, sec := range secrets {
		if _, ok := g.LookupKey(sec); !ok {
			t.Fatal("a key of the ledger is missing after the full sync")
		}
	}
	// A second syncer finds the mark: no second full sync.
	s2 := r.syncer()
	time.Sleep(200 * time.Millisecond)
	if s2.FullSyncs() != 0 {
		t.Fatal("a marked bucket was synced in full again")
	}
}

// TestFullSyncOfAnOlderFormat: a bucket marked by this database's full
// sync of an older release (a mark without the states' format) is synced
// in full again, so that every state gains the fields added since.
func TestFullSyncOfAnOlderFormat(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := r.store.KeySyncEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(map[string]any{"epoch": epoch, "synced_at": time.Now().UTC()})
	if _, err := b.Keys.Put(ctx, "_sync", old); err != nil {
		t.Fatal(err)
	}
	r.customerWithKeys(3)
	s := r.syncer()
	eventually(t, 10*time.Second, "a full sync", func() bool { return s.FullSyncs() == 1 })
	s2 := r.syncer()
	time.Sleep(200 * time.Millisecond)
	if s2.FullSyncs() != 0 {
		t.Fatal("a bucket marked with the current format was synced in full again")
	}
}

// TestFullSyncIntoAnEmptyBucket: the pipelined path publishes every key.
func TestFullSyncIntoAnEmptyBucket(t *testing.T) {
	r := newRig(t)
	secrets := r.customerWithKeys(30)
	s := r.syncer()
	eventually(t, 10*time.Second, "a full sync", func() bool { return s.FullSyncs() == 1 })
	if got := s.Published(); got < 31 {
		t.Fatalf("published %d states; want 30 keys and 1 customer", got)
	}
	g := r.cache(nil)
	for _, sec := range secrets {
		if _, ok := g.LookupKey(sec); !ok {
			t.Fatal("a key is missing after the full sync")
		}
	}
}

// TestShareAddsTheOtherGateways: each gateway sees the sum of the others'
// counts, never its own.
func TestShareAddsTheOtherGateways(t *testing.T) {
	t.Parallel()
	srv := metertest.NewServer(t)
	var shares []*keys.Share
	for range 3 {
		js := metertest.Connect(t, srv)
		s, err := keys.NewShare(js.Conn(), slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		shares = append(shares, s)
	}
	shares[0].Publish([]usage.LimitCounts{{KeyID: "k", Requests: 3, Tokens: 100, Open: 1}})
	shares[1].Publish([]usage.LimitCounts{{KeyID: "k", Requests: 2, Tokens: 50, Open: 2}})
	eventually(t, time.Second, "the counts shared", func() bool {
		r, tk, o := othersSums(shares[2], "k")
		return r == 5 && tk == 150 && o == 3
	})
	eventually(t, time.Second, "the first gateway sees the second only", func() bool {
		r, tk, o := othersSums(shares[0], "k")
		return r == 2 && tk == 50 && o == 2
	})
	// A newer report replaces the gateway's last one.
	shares[1].Publish([]usage.LimitCounts{{KeyID: "k", Requests: 7}})
	eventually(t, time.Second, "the newer report", func() bool {
		r, _, o := othersSums(shares[2], "k")
		return r == 10 && o == 1
	})
	// Counts read in one order and published in the other: the later
	// reading (the higher Seq) stands, whichever arrived last.
	shares[0].Publish([]usage.LimitCounts{{KeyID: "k", Open: 2, Seq: 11}})
	shares[0].Publish([]usage.LimitCounts{{KeyID: "k", Open: 1, Seq: 10}})
	shares[0].Publish([]usage.LimitCounts{{KeyID: "marker", Open: 1, Seq: 12}})
	eventually(t, time.Second, "the marker", func() bool {
		_, _, o := othersSums(shares[2], "marker")
		return o == 1
	})
	if _, _, o := othersSums(shares[2], "k"); o != 2 {
		t.Fatalf("open %d after readings 11 (open 2) then 10 (open 1) arrived: want 2, the later reading", o)
	}
}

// othersSums adds up what s holds of the other gateways' counts of key.
func othersSums(s *keys.Share, key string) (req, tok, open int64) {
	seconds, open := s.Others(key)
	for _, sec := range seconds {
		req, tok = req+sec.Requests, tok+sec.Tokens
	}
	return req, tok, open
}

// TestShareCarriesTheSeconds: a gateway's counts reach the others by the
// second they were counted in, so that each slides the minute itself and
// tells when they leave it (a 429's Retry-After); an earlier release's
// sums alone are held as counted when they arrive.
func TestShareCarriesTheSeconds(t *testing.T) {
	t.Parallel()
	shares := newShares(t, 2)
	secs := []usage.LimitSecond{{Unix: 1_800_000_000, Requests: 2, Tokens: 40}, {Unix: 1_800_000_030, Requests: 1, Tokens: 9_000_000_000}}
	shares[0].Publish([]usage.LimitCounts{{KeyID: "k", Requests: 3, Tokens: 9_000_000_040, Open: 1, Seq: 1, Seconds: secs}})
	var got []usage.LimitSecond
	eventually(t, time.Second, "the seconds shared", func() bool {
		got, _ = shares[1].Others("k")
		return len(got) > 0
	})
	if !slices.Equal(got, secs) {
		t.Fatalf("seconds heard %v; want %v", got, secs)
	}
	before := time.Now().Unix()
	shares[0].Publish([]usage.LimitCounts{{KeyID: "old", Requests: 4, Tokens: 7}})
	eventually(t, time.Second, "an earlier release's sums", func() bool {
		got, _ = shares[1].Others("old")
		return len(got) > 0
	})
	if len(got) != 1 || got[0].Requests != 4 || got[0].Tokens != 7 || got[0].Unix < before || got[0].Unix > time.Now().Unix() {
		t.Fatalf("sums without seconds heard as %v; want 4 requests and 7 tokens in the second they came", got)
	}
	// A message holds about 256 KiB: 4,000 keys busy in every second of
	// their minute (about 2.5 MB) arrive whole, in several.
	many := make([]usage.LimitCounts, 4000)
	for i := range many {
		many[i] = usage.LimitCounts{KeyID: fmt.Sprintf("busy-%d", i), Requests: 60, Tokens: 60 * 1_000_000_000, Seq: 2}
		for s := range int64(60) {
			many[i].Seconds = append(many[i].Seconds, usage.LimitSecond{Unix: 1_800_000_000 + s, Requests: 1, Tokens: 1_000_000_000})
		}
	}
	shares[0].Publish(many)
	eventually(t, 2*time.Second, "4,000 busy keys", func() bool {
		for _, c := range many {
			if r, _, _ := othersSums(shares[1], c.KeyID); r != 60 {
				return false
			}
		}
		return true
	})
}

// TestCacheRatesAsTheLedgerCharges: with the price book and a customer's
// discount pushed, a gateway's rating of a request is the charge the
// ledger records for it; a custom price wins over the book; a model
// without a price is unpriced (no cost shown).
func TestCacheRatesAsTheLedgerCharges(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sync := r.syncer()
	g := r.cache(nil)
	k, _ := r.oneKey()
	month := time.Now().UTC().AddDate(0, -1, 0)
	if _, err := r.store.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "2.5", CachedInput: "1.25",
		Output: "10", Reasoning: "12", EffectiveFrom: month}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.CreateOverride(ctx, k.CustomerID, ledger.OverrideInput{Model: "", DiscountPercent: "12.5", EffectiveFrom: month}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.CreateOverride(ctx, k.CustomerID, ledger.OverrideInput{Model: "custom", EffectiveFrom: month,
		Price: &ledger.PriceInput{Currency: "USD", Input: "0.3", Output: "0.7"}}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sync.Sync(wctx); err != nil {
		t.Fatal(err)
	}
	if err := g.CatchUp(wctx); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"m", "custom", "unpriced"} {
		e := usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: time.Now(), CustomerID: k.CustomerID, KeyID: k.ID,
			Provider: "sim", Model: model, Endpoint: "/v1/chat/completions", Status: usage.StatusOK, HTTPStatus: 200,
			Usage:       usage.Tokens{PromptTokens: 1234, CachedTokens: 200, CompletionTokens: 567, ReasoningTokens: 89},
			UsageSource: usage.SourceUpstream}
		rating, ok := g.Rate(&e)
		if !ok {
			t.Fatalf("%s: no rating", model)
		}
		if _, err := r.store.WriteEvents(ctx, []usage.Event{e}); err != nil {
			t.Fatal(err)
		}
		stored, err := r.store.Event(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if model == "unpriced" {
			if !rating.Unpriced || rating.Charge() != "" {
				t.Fatalf("unpriced: rating %+v charge %q", rating, rating.Charge())
			}
			continue
		}
		if rating.Charge() != stored.Charge || rating.Currency != stored.Currency {
			t.Fatalf("%s: the gateway shows %s %s, the ledger charged %s %s", model, rating.Charge(), rating.Currency,
				stored.Charge, stored.Currency)
		}
	}
}

// TestOneFullSyncAtATime: syncers started together on an unmarked bucket
// (each meter and admin process runs one) sync it once between them,
// under the lease.
func TestOneFullSyncAtATime(t *testing.T) {
	r := newRig(t)
	r.customerWithKeys(200)
	syncers := []*keys.Syncer{r.syncer(), r.syncer(), r.syncer()}
	total := func() (n int64) {
		for _, s := range syncers {
			n += s.FullSyncs()
		}
		return n
	}
	eventually(t, 10*time.Second, "a full sync", func() bool { return total() >= 1 })
	time.Sleep(1500 * time.Millisecond) // the others' next look at the mark
	if n := total(); n != 1 {
		t.Fatalf("%d full syncs by 3 syncers started together; want 1", n)
	}
}

// TestFullSyncTakesOverAnExpiredLease: a lease left by a process that
// died is taken over once it expires, and released after the sync.
func TestFullSyncTakesOverAnExpiredLease(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A lease ("_sync_lease", as meter/keys/lease.go names it) whose
	// holder died without releasing it: live for 2 more seconds.
	dead, _ := json.Marshal(map[string]any{"holder": "died", "until": time.Now().Add(2 * time.Second)})
	if _, err := b.Keys.Create(ctx, "_sync_lease", dead); err != nil {
		t.Fatal(err)
	}
	secret := r.customerWithKeys(1)[0]
	start := time.Now()
	s := r.syncer()
	eventually(t, 10*time.Second, "a full sync", func() bool { return s.FullSyncs() == 1 })
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("synced %v after start, while another's lease was live", d)
	}
	if _, ok := r.cache(nil).LookupKey(secret); !ok {
		t.Fatal("the key is missing after the full sync")
	}
	// The sync is counted before its lease is deleted: wait for the delete.
	eventually(t, 5*time.Second, "the lease released after the full sync", func() bool {
		_, err := b.Keys.Get(ctx, "_sync_lease")
		return err != nil
	})
}

// TestShareMergesChanges: a gateway sends its whole minute every second
// and, at each change, only the second it moved (Partial); the others
// merge that second into the minute they heard, a second being replaced
// only by a later publication's, and a whole minute replacing what came
// before it but the seconds of later changes.
func TestShareMergesChanges(t *testing.T) {
	t.Parallel()
	shares := newShares(t, 2)
	now := time.Now().Unix()
	sec := func(ago int64, req int64) usage.LimitSecond {
		return usage.LimitSecond{Unix: now - ago, Requests: req, Tokens: 10 * req}
	}
	heard := func(want []usage.LimitSecond, what string) {
		t.Helper()
		slices.SortFunc(want, func(a, b usage.LimitSecond) int { return cmp.Compare(a.Unix, b.Unix) })
		var got []usage.LimitSecond
		ok := false
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			got, _ = shares[1].Others("k")
			slices.SortFunc(got, func(a, b usage.LimitSecond) int { return cmp.Compare(a.Unix, b.Unix) })
			if ok = slices.Equal(got, want); ok {
				break
			}
		}
		if !ok {
			t.Fatalf("%s: heard %v; want %v", what, got, want)
		}
	}
	pub := func(c usage.LimitCounts) { shares[0].Publish([]usage.LimitCounts{c}) }

	pub(usage.LimitCounts{KeyID: "k", Requests: 3, Tokens: 30, Seq: 10, Seconds: []usage.LimitSecond{sec(30, 1), sec(20, 2)}})
	heard([]usage.LimitSecond{sec(30, 1), sec(20, 2)}, "the whole minute")
	pub(usage.LimitCounts{KeyID: "k", Requests: 4, Tokens: 40, Seq: 11, Partial: true, Seconds: []usage.LimitSecond{sec(0, 1)}})
	heard([]usage.LimitSecond{sec(30, 1), sec(20, 2), sec(0, 1)}, "a change's new second, merged")
	pub(usage.LimitCounts{KeyID: "k", Requests: 3, Tokens: 30, Seq: 12, Partial: true, Seconds: []usage.LimitSecond{sec(20, 1)}})
	heard([]usage.LimitSecond{sec(30, 1), sec(20, 1), sec(0, 1)}, "a change to an older second")
	// Read before the last change, published after it: its second 20 is
	// older than what was heard of it, its second 5 new.
	pub(usage.LimitCounts{KeyID: "k", Requests: 5, Tokens: 50, Seq: 9, Partial: true, Seconds: []usage.LimitSecond{sec(20, 3), sec(5, 1)}})
	heard([]usage.LimitSecond{sec(30, 1), sec(20, 1), sec(5, 1), sec(0, 1)}, "a change read earlier, published later")
	// A whole minute read before change 12, published after it, is
	// older than what was heard: dropped. The next one replaces the
	// minute heard.
	pub(usage.LimitCounts{KeyID: "k", Requests: 9, Tokens: 90, Seq: 11, Seconds: []usage.LimitSecond{sec(40, 9)}})
	pub(usage.LimitCounts{KeyID: "k", Requests: 2, Tokens: 20, Seq: 13, Seconds: []usage.LimitSecond{sec(20, 1), sec(0, 1)}})
	heard([]usage.LimitSecond{sec(20, 1), sec(0, 1)}, "the next whole minute, the older one dropped")
	// Seconds that have left the minute are forgotten.
	pub(usage.LimitCounts{KeyID: "k", Requests: 2, Tokens: 20, Seq: 14, Partial: true, Seconds: []usage.LimitSecond{sec(61, 1)}})
	heard([]usage.LimitSecond{sec(20, 1), sec(0, 1)}, "a second past the minute")
}

// newShares starts n limit shares, each on a connection of its own to
// one fresh JetStream server: n gateways' shares.
func newShares(tb testing.TB, n int) []*keys.Share {
	tb.Helper()
	srv := metertest.NewServer(tb)
	shares := make([]*keys.Share, n)
	for i := range shares {
		s, err := keys.NewShare(metertest.Connect(tb, srv).Conn(), slog.Default())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		shares[i] = s
	}
	return shares
}
