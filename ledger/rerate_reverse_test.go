package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestARerateEntryCannotBeReversed: an event first stored unpriced is
// priced by re-rating (a rerate entry of −charge). The rerate entry could
// be reversed (POST /entries/{id}/reverse), which gave the charge back;
// RefundEvent, which computes what the event was charged from its rerate
// entries but not their reversals, then gave it back a second time: the
// customer was credited for usage it consumed. Reverse now refuses a
// rerate entry (409), and the refund gives the charge back once.
func TestARerateEntryCannotBeReversed(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	e := newEvent(c.ID, k.ID, "late-priced", at, usage.Tokens{PromptTokens: 1_000_000})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "late-priced", Currency: "USD", Input: "10", Output: "10",
		EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rerate(ctx, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), nil); err != nil {
		t.Fatal(err)
	}
	es, err := s.Entries(ctx, c.ID, time.Time{}, time.Time{})
	if err != nil || len(es) != 1 || es[0].Kind != ledger.KindRerate {
		t.Fatalf("entries = %+v, %v; want one rerate entry", es, err)
	}
	b, _ := s.Balance(ctx, c.ID)
	if b.Balance != "-10" {
		t.Fatalf("balance after pricing = %s, want -10", b.Balance)
	}
	// Undo the re-rating's charge (refused), then refund the event.
	if _, err := s.Reverse(ctx, es[0].ID, "undo re-rating"); ledger.ErrorCode(err) != ledger.EConflict {
		t.Fatalf("Reverse(rerate entry) = %v, want a conflict", err)
	}
	ref, err := s.RefundEvent(ctx, e.ID, "goodwill")
	if err != nil {
		t.Fatalf("RefundEvent = %v", err)
	}
	b, _ = s.Balance(ctx, c.ID)
	if bal, _ := decimal.NewFromString(b.Balance); !bal.IsZero() {
		t.Errorf("after reversing the rerate entry (+10) and refunding the event (+%s), balance = %s: "+
			"a 10 USD event was given back %s USD", ref.Amount, b.Balance, decimal.RequireFromString(b.Balance).Add(decimal.NewFromInt(10)))
	}
}

// TestARefundReversedIsNotReplayed: an event refunded, its refund entry
// reversed, then refunded again, got the first refund back (201) as the
// replay of the event's one refund, and no money moved: the operator saw
// a refund that was not there. The second refund is now a conflict that
// names the reversal, and the balance is the event's charge.
func TestARefundReversedIsNotReplayed(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "priced", Currency: "USD", Input: "10", Output: "10",
		EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	e := newEvent(c.ID, k.ID, "priced", time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 1_000_000})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	ref, err := s.RefundEvent(ctx, e.ID, "goodwill")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reverse(ctx, ref.ID, "refunded by mistake"); err != nil {
		t.Fatal(err)
	}
	if again, err := s.RefundEvent(ctx, e.ID, "goodwill, again"); ledger.ErrorCode(err) != ledger.EConflict {
		t.Fatalf("a second refund after the first was reversed = %+v, %v; want a conflict", again, err)
	}
	if b, _ := s.Balance(ctx, c.ID); b.Balance != "-10" {
		t.Fatalf("balance = %s, want -10 (charged, refunded, refund reversed)", b.Balance)
	}
	// A refund replayed while it stands is still the first one.
	e2 := newEvent(c.ID, k.ID, "priced", time.Date(2026, 3, 10, 13, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 1_000_000})
	if _, err := s.WriteEvents(ctx, []usage.Event{e2}); err != nil {
		t.Fatal(err)
	}
	first, err := s.RefundEvent(ctx, e2.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.RefundEvent(ctx, e2.ID, "one"); err != nil || again.ID != first.ID {
		t.Fatalf("replayed refund = %+v, %v; want entry %d", again, err, first.ID)
	}
}

// TestARefundWaitsForARerateInProgress: a refund read the event's charge
// outside any lock, so a re-rating batch that committed between that read
// and the refund's insert (it saw no refund yet, and lowered the charge)
// left the refund giving back the old, higher charge. Here a connection
// plays the re-rating batch: it holds the rerate lock and writes a rerate
// entry of +4 USD (the charge 10 → 6) while the refund starts; the refund
// must give back 6, what the event is charged once the batch commits.
func TestARefundWaitsForARerateInProgress(t *testing.T) {
	s, url := ledgertest.NewStoreURL(t)
	c, k := newCustomer(t, s)
	ctx := context.Background()
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "priced", Currency: "USD", Input: "10", Output: "10",
		EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	e := newEvent(c.ID, k.ID, "priced", time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 1_000_000})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('rerate'))`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ledger_entries (customer_id, kind, amount_e12, currency, effective_at, event_id)
		VALUES ($1, 'rerate', 4000000000000, 'USD', $2, $3)`, c.ID, e.Time, e.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		e   ledger.Entry
		err error
	}
	done := make(chan result, 1)
	go func() {
		ref, err := s.RefundEvent(ctx, e.ID, "goodwill")
		done <- result{ref, err}
	}()
	time.Sleep(300 * time.Millisecond) // the refund has read the charge (and, unlocked, written its entry)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.e.Amount != "6" {
		t.Fatalf("refund of %s USD; the event is charged 6 USD once the re-rating in progress commits", r.e.Amount)
	}
}

// TestRefundAgainAfterAReversedRefundAndARerate: an event refunded, the
// refund reversed, the event re-rated (its cost changed), and refunded
// again: the answer was a 409 about an idempotency key used "for a
// different entry", where without the re-rating it names the reversal
// (found by review). Both now name the refund and its reversal.
func TestRefundAgainAfterAReversedRefundAndARerate(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "10", Output: "10", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	e := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 1_000_000})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	ref, err := s.RefundEvent(ctx, e.ID, "goodwill")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.Reverse(ctx, ref.ID, "refunded by mistake")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "20", Output: "20", EffectiveFrom: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Rerate(ctx, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), nil); err != nil || res.Adjusted != 1 {
		t.Fatalf("Rerate = %+v, %v; want the event adjusted", res, err)
	}
	_, err = s.RefundEvent(ctx, e.ID, "again")
	want := fmt.Sprintf("refunded by entry %d, which entry %d reversed", ref.ID, rev.ID)
	if ledger.ErrorCode(err) != ledger.EConflict || !strings.Contains(err.Error(), want) {
		t.Fatalf("a second refund after the reversal and the re-rating = %v; want a conflict saying %q", err, want)
	}
}
