package keys_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/keys"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnOlderStateNeverReplacesANewerInTheBucket: a publisher that races
// another with an older read of a key (its state before the revocation)
// leaves the newer, revoked state in the bucket, and a gateway keeps
// refusing the key. (Mutant: Publisher's put without its version check.)
func TestAnOlderStateNeverReplacesANewerInTheBucket(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := keys.NewPublisher(b, slog.Default())
	secret := "tg-older-state"
	hash := usage.KeyHash(secret)
	active := usage.KeyState{KeyID: "00000000-0000-0000-0000-000000000001", CustomerID: "00000000-0000-0000-0000-000000000002",
		Currency: "USD", Version: 5}
	if err := p.PutKey(ctx, hash, usage.KeyState{Revoked: true, Version: 10}); err != nil {
		t.Fatal(err)
	}
	if err := p.PutKey(ctx, hash, active); err != nil {
		t.Fatal(err)
	}
	e, err := b.Keys.Get(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	var got usage.KeyState
	if err := json.Unmarshal(e.Value(), &got); err != nil || !got.Revoked || got.Version != 10 {
		t.Fatalf("bucket holds %s (%v); want the revoked state of version 10", e.Value(), err)
	}
	if _, ok := r.cache(nil).LookupKey(secret); ok {
		t.Fatal("a revoked key works again after an older state was published")
	}
}

// TestAGatewayForgetsAKeyTheFullSyncDeletes: a key the ledger does not
// have (another database's), held by a running gateway, stops working
// there once the full sync deletes its entry. (Mutant: the cache applying
// a purge but not a delete.)
func TestAGatewayForgetsAKeyTheFullSyncDeletes(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secret := "tg-from-another-database"
	data, _ := json.Marshal(usage.KeyState{KeyID: "00000000-0000-0000-0000-000000000001",
		CustomerID: "00000000-0000-0000-0000-000000000002", Currency: "USD", Version: 1})
	if _, err := b.Keys.Put(ctx, usage.KeyHash(secret), data); err != nil {
		t.Fatal(err)
	}
	g := r.cache(nil)
	if _, ok := g.LookupKey(secret); !ok {
		t.Fatal("the key in the bucket does not work before the full sync")
	}
	r.customerWithKeys(1)
	s := r.syncer()
	eventually(t, 10*time.Second, "a full sync", func() bool { return s.FullSyncs() == 1 })
	eventually(t, 5*time.Second, "the deleted key refused on the gateway", func() bool {
		_, ok := g.LookupKey(secret)
		return !ok
	})
}

// TestAnotherDatabasesMarkIsSyncedOver: a bucket marked by another
// database's full sync (a gateway fleet pointed at a new database, say),
// in the current format, is synced in full again: the other database's
// keys stop working. (Mutant: the mark taken as this ledger's whatever
// epoch it names.)
func TestAnotherDatabasesMarkIsSyncedOver(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mark, _ := json.Marshal(map[string]any{"epoch": "another-database", "synced_at": time.Now().UTC(), "format": 1 << 20})
	if _, err := b.Keys.Put(ctx, "_sync", mark); err != nil {
		t.Fatal(err)
	}
	foreign := usage.KeyHash("tg-from-another-database")
	data, _ := json.Marshal(usage.KeyState{KeyID: "00000000-0000-0000-0000-000000000001", CustomerID: "00000000-0000-0000-0000-000000000002", Version: 1})
	if _, err := b.Keys.Put(ctx, foreign, data); err != nil {
		t.Fatal(err)
	}
	r.customerWithKeys(1)
	s := r.syncer()
	eventually(t, 10*time.Second, "a full sync", func() bool { return s.FullSyncs() == 1 })
	if _, err := b.Keys.Get(ctx, foreign); err == nil {
		t.Fatal("another database's key survived the full sync")
	}
}

// TestFullSyncKeepsTheNewerState: a full sync into a bucket that holds
// states already replaces each older one (a bucket restored from a backup
// holding a revoked key's active state: the key must not work again) and
// leaves each newer one (a revocation published from the outbox while the
// sync ran: its earlier read must not undo it). (Mutants: create's
// create-only publication, and its fallback to the version-checked put.)
func TestFullSyncKeepsTheNewerState(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	revoked, revokedSecret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "revoked"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.RevokeKey(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	active, activeSecret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "active"})
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal(usage.KeyState{KeyID: revoked.ID, CustomerID: c.ID, Currency: "USD", Version: 1})
	if _, err := b.Keys.Put(ctx, usage.KeyHash(revokedSecret), stale); err != nil {
		t.Fatal(err)
	}
	newer := usage.KeyState{Revoked: true, Version: 1 << 62}
	data, _ := json.Marshal(newer)
	if _, err := b.Keys.Put(ctx, usage.KeyHash(activeSecret), data); err != nil {
		t.Fatal(err)
	}
	// The outbox's changes taken unpublished: only the full sync writes.
	if _, err := r.store.PublishKeyChanges(ctx, 100, func(context.Context, usage.Changes) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s := r.syncer()
	eventually(t, 10*time.Second, "a full sync", func() bool { return s.FullSyncs() == 1 })
	g := r.cache(nil)
	if _, ok := g.LookupKey(revokedSecret); ok {
		t.Fatal("a revoked key works after a full sync over its older, active state")
	}
	e, err := b.Keys.Get(ctx, usage.KeyHash(activeSecret))
	if err != nil {
		t.Fatal(err)
	}
	var got usage.KeyState
	if err := json.Unmarshal(e.Value(), &got); err != nil || !got.Revoked || got.Version != newer.Version {
		t.Fatalf("key %s: bucket holds %s after the full sync; want the newer state %+v", active.ID, e.Value(), newer)
	}
}
