package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// wantCode fails the test unless err is a ledger error with code whose
// message contains msg.
func wantCode(t *testing.T, what string, err error, code, msg string) {
	t.Helper()
	var le *ledger.Error
	if !errors.As(err, &le) || le.Code != code || !strings.Contains(le.Message, msg) {
		t.Errorf("%s: error %v (code %q), want code %s with %q", what, err, ledger.ErrorCode(err), code, msg)
	}
}

// noErr fails the test on err.
func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestClientAccounts: customers, keys, prices and overrides through the
// client, against the real admin API.
func TestClientAccounts(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), context.Background()
	limit := "10"
	cu, err := c.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme", Currency: "eur", CreditLimit: &limit})
	noErr(t, "CreateCustomer", err)
	if cu.Currency != "EUR" || cu.CreditLimit == nil || dec(t, *cu.CreditLimit).String() != "10" {
		t.Fatalf("CreateCustomer = %+v", cu)
	}
	_, err = c.CreateCustomer(ctx, ledger.CustomerInput{Name: "globex"})
	noErr(t, "CreateCustomer", err)
	all, err := c.Customers(ctx, "")
	noErr(t, "Customers", err)
	named, err := c.Customers(ctx, "acme")
	noErr(t, "Customers", err)
	got, err := c.Customer(ctx, cu.ID)
	noErr(t, "Customer", err)
	if len(all) != 2 || all[0].ID != cu.ID || len(named) != 1 || named[0].ID != cu.ID || got.Name != "acme" {
		t.Fatalf("Customers = %+v, Customers(acme) = %+v, Customer = %+v", all, named, got)
	}
	name := "acme corp"
	up, err := c.UpdateCustomer(ctx, cu.ID, ledger.CustomerPatch{Name: &name, SetCreditLimit: true})
	noErr(t, "UpdateCustomer", err)
	b, err := c.Balance(ctx, cu.ID)
	noErr(t, "Balance", err)
	if up.Name != name || up.CreditLimit != nil || b.Currency != "EUR" || !dec(t, b.Balance).IsZero() || b.Available != nil {
		t.Fatalf("UpdateCustomer (renamed, no limit) = %+v, Balance = %+v", up, b)
	}

	_, err = c.CreateKey(ctx, cu.ID, ledger.KeyInput{}) // KeyCreate requires a name, as PATCH keeps one
	wantCode(t, "CreateKey without a name", err, ledger.EInvalid, "name must not be empty")
	k, err := c.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "ci"})
	noErr(t, "CreateKey", err)
	if !strings.HasPrefix(k.Secret, ledger.KeyPrefix) || k.CustomerID != cu.ID || k.Name != "ci" {
		t.Fatalf("CreateKey = %+v", k)
	}
	revoked, err := c.RevokeKey(ctx, k.ID)
	noErr(t, "RevokeKey", err)
	ks, err := c.Keys(ctx, cu.ID)
	noErr(t, "Keys", err)
	if revoked.RevokedAt == nil || len(ks) != 1 || ks[0].ID != k.ID || ks[0].RevokedAt == nil {
		t.Fatalf("RevokeKey = %+v, Keys = %+v", revoked, ks)
	}
	_, err = c.RevokeKey(ctx, k.ID)
	wantCode(t, "RevokeKey twice", err, ledger.EConflict, "")

	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := ledger.PriceInput{Model: "m", Currency: "EUR", Input: "1.5", Output: "6", EffectiveFrom: from}
	p, err := c.CreatePrice(ctx, in)
	noErr(t, "CreatePrice", err)
	ps, err := c.Prices(ctx, "m")
	noErr(t, "Prices", err)
	none, err := c.Prices(ctx, "other")
	noErr(t, "Prices", err)
	if p.ID == 0 || p.Model != "m" || dec(t, p.Input).String() != "1.5" || !p.EffectiveFrom.Equal(from) ||
		len(ps) != 1 || ps[0].ID != p.ID || len(none) != 0 {
		t.Fatalf("CreatePrice = %+v, Prices(m) = %+v, Prices(other) = %+v", p, ps, none)
	}
	_, err = c.CreatePrice(ctx, in)
	wantCode(t, "CreatePrice twice", err, ledger.EConflict, "")

	discount, err := c.CreateOverride(ctx, cu.ID, ledger.OverrideInput{DiscountPercent: "12.5", EffectiveFrom: from})
	noErr(t, "CreateOverride", err)
	custom := &ledger.PriceInput{Currency: "EUR", Input: "2", Output: "8"}
	priced, err := c.CreateOverride(ctx, cu.ID, ledger.OverrideInput{Model: "m", Price: custom, EffectiveFrom: from})
	noErr(t, "CreateOverride", err)
	ovs, err := c.Overrides(ctx, cu.ID)
	noErr(t, "Overrides", err)
	if discount.DiscountBP != 1250 || discount.Price != nil || priced.Price == nil || dec(t, priced.Price.Output).String() != "8" ||
		len(ovs) != 2 {
		t.Fatalf("CreateOverride = %+v and %+v, Overrides = %+v", discount, priced, ovs)
	}
	_, err = c.CreateOverride(ctx, cu.ID, ledger.OverrideInput{DiscountPercent: "5", EffectiveFrom: from})
	wantCode(t, "an override starting with another", err, ledger.EConflict, "overlaps")
	later, err := c.CreateOverride(ctx, cu.ID, ledger.OverrideInput{DiscountPercent: "5", EffectiveFrom: from.AddDate(0, 6, 0)})
	noErr(t, "CreateOverride of new terms from a later date", err)
	if later.DiscountBP != 500 {
		t.Fatalf("the later override = %+v", later)
	}
}

// TestClientEntriesAndEvents: credits and adjustments (with an idempotency
// key), reversals, an event and its refund, the entries and the balance
// they make.
func TestClientEntriesAndEvents(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), context.Background()
	id, keyID, _ := s.customer(`{"name":"a"}`)
	_, err := c.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1",
		EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	noErr(t, "CreatePrice", err)
	ev := event(id, keyID, "m", time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 1000})
	s.write(ev) // 0.001 USD

	topUp := ledger.EntryInput{Amount: "10", Memo: "top-up", IdempotencyKey: "k1"}
	credit, err := c.AddEntry(ctx, id, ledger.KindCredit, topUp)
	noErr(t, "credit", err)
	again, err := c.AddEntry(ctx, id, ledger.KindCredit, topUp)
	noErr(t, "credit again", err)
	adj, err := c.AddEntry(ctx, id, ledger.KindAdjustment, ledger.EntryInput{Amount: "-1", Memo: "fix"})
	noErr(t, "adjustment", err)
	if credit.Kind != ledger.KindCredit || again.ID != credit.ID || adj.Kind != ledger.KindAdjustment {
		t.Fatalf("credit %+v, again %+v, adjustment %+v", credit, again, adj)
	}
	_, err = c.AddEntry(ctx, id, ledger.KindAdjustment, ledger.EntryInput{Amount: "2", IdempotencyKey: "k1"})
	wantCode(t, "an idempotency key reused", err, ledger.EConflict, "idempotency_key")
	_, err = c.AddEntry(ctx, id, ledger.KindRefund, ledger.EntryInput{Amount: "2"})
	wantCode(t, "AddEntry(refund)", err, ledger.EInvalid, "kind")
	_, err = c.AddEntry(ctx, id, ledger.KindCredit, ledger.EntryInput{Amount: "-2"})
	wantCode(t, "a negative credit", err, ledger.EInvalid, "amount")

	rev, err := c.Reverse(ctx, credit.ID, "granted by mistake")
	noErr(t, "Reverse", err)
	if rev.Kind != ledger.KindRefund || rev.Reverses != credit.ID || dec(t, rev.Amount).String() != "-10" {
		t.Fatalf("Reverse = %+v", rev)
	}
	_, err = c.Reverse(ctx, 999999, "")
	wantCode(t, "Reverse(unknown)", err, ledger.ENotFound, "not found")
	_, err = c.Reverse(ctx, 0, "")
	wantCode(t, "Reverse(0)", err, ledger.EInvalid, `entry id "0" is not valid`)

	e, err := c.Event(ctx, ev.ID)
	noErr(t, "Event", err)
	if e.ID != ev.ID || e.CustomerID != id || dec(t, e.Cost).String() != "0.001" || e.Usage.PromptTokens != 1000 {
		t.Fatalf("Event = %+v", e)
	}
	ref, err := c.RefundEvent(ctx, ev.ID, "outage")
	noErr(t, "RefundEvent", err)
	if ref.Kind != ledger.KindRefund || ref.EventID != ev.ID || dec(t, ref.Amount).String() != "0.001" {
		t.Fatalf("RefundEvent = %+v", ref)
	}
	_, err = c.Event(ctx, uuid.NewString())
	wantCode(t, "Event(unknown)", err, ledger.ENotFound, "not found")

	es, err := c.Entries(ctx, id, time.Time{}, time.Time{})
	noErr(t, "Entries", err)
	old, err := c.Entries(ctx, id, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2000, 2, 1, 0, 0, 0, 0, time.UTC))
	noErr(t, "Entries", err)
	if len(es) != 4 || len(old) != 0 {
		t.Fatalf("Entries = %+v (want credit, adjustment, reversal, refund); in 2000 %+v", es, old)
	}
	now := time.Now()
	_, err = c.Entries(ctx, id, now, now.Add(-time.Hour))
	wantCode(t, "Entries(to before from)", err, ledger.EInvalid, "before")
	// 10 − 1 − 10 (reversed) + 0.001 (refunded) − 0.001 (the event's charge).
	if b, err := c.Balance(ctx, id); err != nil || dec(t, b.Balance).String() != "-1" {
		t.Fatalf("Balance = %+v, %v", b, err)
	}
}
