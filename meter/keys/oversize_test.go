package keys_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/keys"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestOversizedStatesDoNotStopKeySync: the ledger bounds what it lets
// the API write into a state, but a database can already hold more
// (older data, or data written by SQL). A key's, a customer's and a
// model's states past NATS' max_payload (1 MiB) were refused at every
// try, their batch of changes stayed in the outbox, and no change after
// them (a revocation included) reached the gateways. Each is published
// degraded instead, safe for the gateways: the key refused, the customer
// with its budget fields but fewer or no overrides, the model refused an
// estimate; and the full state again once the data is fixed.
func TestOversizedStatesDoNotStopKeySync(t *testing.T) {
	t.Parallel()
	store, dbURL := ledgertest.NewStoreURL(t)
	r := &rig{t: t, store: store, js: metertest.Connect(t, metertest.NewServer(t))}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	limit := "100"
	c, err := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme", CreditLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	soon, err := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "soon"})
	if err != nil {
		t.Fatal(err)
	}
	big, bigSecret, err := store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "big"})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	sync := r.syncer()
	gw := r.cache(nil) // no loader: only what is pushed
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := sync.Wait(wctx, k.Change); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the key on the gateway", func() bool {
		_, ok := gw.LookupKey(secret)
		return ok
	})
	model := strings.Repeat("<", 200)
	// Written by SQL, with the outbox rows the ledger would add: 2,000
	// names of 200 "<" (1.2 KB each as JSON), which put every state past
	// 1 MiB. acme's overrides are all in force, soon's but one to come.
	names := `SELECT repeat('<', 200) || i AS m, i FROM generate_series(1, 2000) i`
	exec(`UPDATE api_keys SET allowed_models = ARRAY(SELECT m FROM (`+names+`) n) WHERE id = $1`, big.ID)
	exec(`INSERT INTO price_overrides (customer_id, model, discount_bp, effective_from)
		SELECT $1, m, 500, now() - interval '1 day' FROM (`+names+`) n`, c.ID)
	exec(`INSERT INTO price_overrides (customer_id, model, discount_bp, effective_from)
		SELECT $1::uuid, m, 500, now() + i * interval '1 day' FROM (`+names+`) n
		UNION ALL SELECT $1::uuid, '', 1000, now() - interval '1 day'`, soon.ID)
	exec(`INSERT INTO prices (model, currency, input_micros, cached_input_micros, cache_write_micros, output_micros, effective_from)
		SELECT $1, 'USD', i, 0, 0, i, now() - interval '1 day' + i * interval '1 hour' FROM generate_series(1, 2000) i`, model)
	exec(`INSERT INTO key_outbox (kind, ref) VALUES ('key', $1), ('customer', $2), ('customer', $3), ('price', $4)`,
		big.ID, c.ID, soon.ID, model)

	revoked, err := store.RevokeKey(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Its put may land beside the refused ones, but its change must leave
	// the outbox, as must every later one.
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if err := sync.Wait(rctx, revoked.Change); err != nil {
		t.Fatalf("a revocation after oversized states: %v", err)
	}
	eventually(t, 5*time.Second, "the revocation on the gateway", func() bool {
		_, ok := gw.LookupKey(secret)
		return !ok
	})
	if err := gw.CatchUp(wctx); err != nil {
		t.Fatal(err)
	}

	// The key is refused, saying why, with no allowlist to pass.
	st, ok := gw.LookupKey(bigSecret)
	if !ok || !strings.Contains(st.BlockedAt(time.Now()), "too large") || len(st.AllowedModels) != 0 {
		t.Errorf("the oversized key on the gateway: ok=%v blocked=%q, %d models; want it blocked as too large, no models",
			ok, st.BlockedAt(time.Now()), len(st.AllowedModels))
	}
	// The customers keep their budget fields, with the overrides in force
	// now if they fit, else none.
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	customer := func(id string) usage.CustomerState {
		t.Helper()
		e, err := b.Customers.Get(ctx, id)
		if err != nil {
			t.Fatalf("customer %s in the bucket: %v", id, err)
		}
		var s usage.CustomerState
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := customer(c.ID); !s.CreditLimited || s.CreditLeftMicros == nil || len(s.Overrides) != 0 {
		t.Errorf("the customer of 2,000 overrides in force: credit_limited=%v credit_left=%v, %d overrides; want its credit limit, no overrides",
			s.CreditLimited, s.CreditLeftMicros, len(s.Overrides))
	}
	if s := customer(soon.ID); len(s.Overrides) != 1 || s.Overrides[0].Model != "" {
		t.Errorf("the customer of 2,000 overrides to come: %d overrides; want the one in force", len(s.Overrides))
	}
	// The model is not estimated with nothing: the gateway cannot rate it.
	if r, ok := gw.Rate(&usage.Event{CustomerID: c.ID, Model: model, Time: time.Now()}); ok {
		t.Errorf("the model of oversized prices rated on the gateway: %+v; want it unratable", r)
	}

	// A full sync (into a new server's buckets) publishes them so too.
	r2 := &rig{t: t, store: store, js: metertest.Connect(t, metertest.NewServer(t))}
	sync2, gw2 := r2.syncer(), r2.cache(nil)
	eventually(t, 10*time.Second, "a full sync past oversized states", func() bool { return sync2.FullSyncs() > 0 })
	if err := gw2.CatchUp(wctx); err != nil {
		t.Fatal(err)
	}
	if st, ok := gw2.LookupKey(bigSecret); !ok || !strings.Contains(st.BlockedAt(time.Now()), "too large") {
		t.Errorf("the oversized key after a full sync: ok=%v blocked=%q; want it blocked as too large", ok, st.BlockedAt(time.Now()))
	}
	if err := sync2.Stop(ctx); err != nil { // it would take changes into its own buckets
		t.Fatal(err)
	}

	// Fixed, the key's state is published in full again.
	models := []string{"gpt-4o"}
	fixed, err := store.UpdateKey(ctx, big.ID, ledger.KeyPatch{AllowedModels: ledger.Optional[[]string]{Set: true, Value: &models}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sync.Wait(wctx, fixed.Change); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the fixed key's full state on the gateway", func() bool {
		st, ok := gw.LookupKey(bigSecret)
		return ok && st.BlockedAt(time.Now()) == "" && len(st.AllowedModels) == 1
	})
}

// TestAStatePastTheBucketsValueSize: a bucket given a max value size
// (max_msg_size of its stream, set by hand) refuses a state past it with
// a JetStream error (10054) rather than the client's max_payload one:
// it is published smaller too, through a full sync and a change alike.
func TestAStatePastTheBucketsValueSize(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, err := r.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: keys.KeysBucket, History: 1, MaxValueSize: 2048}); err != nil {
		t.Fatal(err)
	}
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	models := make([]string, 40)
	for i := range models {
		models[i] = fmt.Sprint(strings.Repeat("m", 100), i)
	}
	big, bigSecret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "big", AllowedModels: models})
	if err != nil {
		t.Fatal(err)
	}
	sync := r.syncer() // a full sync: big is in the ledger already
	gw := r.cache(nil)
	eventually(t, 10*time.Second, "the full sync", func() bool { return sync.FullSyncs() > 0 })
	refused := func() bool {
		st, ok := gw.LookupKey(bigSecret)
		return ok && strings.Contains(st.BlockedAt(time.Now()), "too large") && len(st.AllowedModels) == 0
	}
	eventually(t, 5*time.Second, "the key past the value size refused on the gateway", refused)
	models = append(models, "one more")
	k, err := r.store.UpdateKey(ctx, big.ID, ledger.KeyPatch{AllowedModels: ledger.Optional[[]string]{Set: true, Value: &models}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sync.Wait(wctx, k.Change); err != nil {
		t.Fatalf("a change past the value size: %v", err)
	}
	eventually(t, 5*time.Second, "the changed key past the value size refused on the gateway", refused)
	models = models[:2]
	if k, err = r.store.UpdateKey(ctx, big.ID, ledger.KeyPatch{AllowedModels: ledger.Optional[[]string]{Set: true, Value: &models}}); err != nil {
		t.Fatal(err)
	}
	if err := sync.Wait(wctx, k.Change); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the key's full state once it fits", func() bool {
		st, ok := gw.LookupKey(bigSecret)
		return ok && st.BlockedAt(time.Now()) == "" && len(st.AllowedModels) == 2
	})
}
