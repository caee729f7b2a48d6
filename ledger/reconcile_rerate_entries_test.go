package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestReconcileFindsRerateEntriesWithoutTheirEvent: a rerate entry is made
// at its event's time, for its event's customer, and moves the rollups in
// the same transaction; the balance and the statement read the rollups,
// while an export's charges (Σ charge − Σ rerate amounts) and an event's
// cost read the entries. An entry written by hand (INSERT is what the
// append-only ledger lets through) that names no stored event, or is dated
// away from its event, moved neither the rollups nor the balance: month by
// month, reconciliation said clean while an audit's December export
// charged $5 more than December's statement and an October event's cost
// read $5.00208545 for its charge of $0.00208545.
func TestReconcileFindsRerateEntriesWithoutTheirEvent(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	oct := time.Date(2026, 10, 1, 10, 0, 0, 0, time.UTC)
	ev := newEvent(c.ID, k.ID, "m", oct, usage.Tokens{PromptTokens: 1000, CompletionTokens: 500})
	if _, err := s.WriteEvents(ctx, []usage.Event{ev}); err != nil {
		t.Fatal(err)
	}
	// A real re-rating, for the check to leave alone.
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{DiscountPercent: "10", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Rerate(ctx, oct.Add(-time.Hour), oct.Add(time.Hour), nil); err != nil || res.Adjusted != 1 {
		t.Fatalf("Rerate = %+v, %v; want one adjusted", res, err)
	}
	months := []time.Time{time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range 3 {
		if rec, err := s.Reconcile(ctx, months[i], months[i+1]); err != nil || !rec.Clean || rec.RerateEntriesWithoutEvent != 0 {
			t.Fatalf("%s: Reconcile = %+v, %v; want clean", months[i].Format("2006-01"), rec, err)
		}
	}
	forge := func(event, at string) {
		t.Helper()
		if err := s.ExecForTest(ctx, `INSERT INTO ledger_entries (customer_id, kind, amount_e12, cost_e12, currency,
			effective_at, event_id, key_id, model, memo) VALUES ('`+c.ID+`', 'rerate', -5000000000000, 0, 'USD', '`+at+`',
			'`+event+`', '`+k.ID+`', 'm', 're-rated')`); err != nil {
			t.Fatal(err)
		}
	}
	forge(ev.ID, "2026-12-02T10:00:00Z")            // the event's, dated in December
	forge(uuid.NewString(), "2026-11-02T10:00:00Z") // no event of that id
	for i, forged := range []bool{false, true, true} {
		rec, err := s.Reconcile(ctx, months[i], months[i+1])
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if forged {
			want = 1
		}
		if rec.Clean == forged || rec.RerateEntriesWithoutEvent != want {
			t.Errorf("%s: clean %v, %d rerate entries without their event; want clean %v, %d",
				months[i].Format("2006-01"), rec.Clean, rec.RerateEntriesWithoutEvent, !forged, want)
		}
	}
}
