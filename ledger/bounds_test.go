package ledger_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestFinanceBoundsAreExactToTheNanosecond: the API takes RFC 3339 times
// with any fraction of a second, Postgres keeps microseconds, and pgx (and
// the export's literal) dropped a bound's nanoseconds. So an export, a
// re-rating or an entry list from A+1ns to B+1ns took the line of A, before
// from, and left out the line of B, before to: a re-rating changed an event
// outside the range asked for and missed one inside it. Usage rounds its
// bounds up to the microsecond (Store.Usage); these now do too. (Found by
// review.)
func TestFinanceBoundsAreExactToTheNanosecond(t *testing.T) {
	b := newBilling(t, nil)
	a := jan.Add(time.Hour)
	bt := jan.Add(2 * time.Hour)
	evA, evB := b.event("late-priced", a, usage.Tokens{PromptTokens: 1000}), b.event("late-priced", bt, usage.Tokens{PromptTokens: 1000})
	b.write(evA, evB)
	for _, at := range []time.Time{a, bt} {
		if _, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "1", EffectiveAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	from, to := a.Add(time.Nanosecond), bt.Add(time.Nanosecond)

	recs := b.export(from, to)
	var times []string
	for _, r := range recs[1:] {
		times = append(times, r[0]+" "+r[1])
	}
	slices.Sort(times)
	want := []string{"entry 2026-01-01T02:00:00.000000Z", "event 2026-01-01T02:00:00.000000Z"}
	if !slices.Equal(times, want) {
		t.Errorf("export [%s, %s) = %v, want %v", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), times, want)
	}

	es, err := b.s.Entries(b.ctx, b.c.ID, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || !es[0].EffectiveAt.Equal(bt) {
		t.Errorf("entries [A+1ns, B+1ns) = %+v, want the credit of B only", es)
	}

	b.price("late-priced", "USD", "1", "0", "")
	res, err := b.s.Rerate(b.ctx, from, to, nil)
	if err != nil || res.Examined != 1 || res.Priced != 1 {
		t.Fatalf("Rerate [A+1ns, B+1ns) = %+v, %v; want the event of B only", res, err)
	}
	if got, err := b.s.Event(b.ctx, evB.ID); err != nil || got.Cost != "0.001" {
		t.Errorf("event of B after re-rating = %+v, %v; want cost 0.001", got, err)
	}
	if got, err := b.s.Event(b.ctx, evA.ID); err != nil || got.Cost != "0" {
		t.Errorf("event of A, before from, after re-rating = %+v, %v; want it left unpriced", got, err)
	}
}

// TestRequestLogBoundsAreExactToTheNanosecond: the customer's request log
// (GET /v1/requests) dropped its bounds' nanoseconds as the finance reads
// did: from A+1ns to B+1ns listed A's request, before from, and not B's,
// before to. (Found by review.)
func TestRequestLogBoundsAreExactToTheNanosecond(t *testing.T) {
	b := newBilling(t, nil)
	a, bt := jan.Add(time.Hour), jan.Add(2*time.Hour)
	evA, evB := b.event("m", a, usage.Tokens{PromptTokens: 1000}), b.event("m", bt, usage.Tokens{PromptTokens: 1000})
	b.write(evA, evB)
	page, err := b.s.Requests(b.ctx, ledger.RequestQuery{CustomerID: b.c.ID, From: a.Add(time.Nanosecond), To: bt.Add(time.Nanosecond)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != evB.ID {
		var got []string
		for _, e := range page.Data {
			got = append(got, e.ID)
		}
		t.Fatalf("requests [A+1ns, B+1ns) = %v, want B's only (%s)", got, evB.ID)
	}
}

// TestInputTimesAreKeptToTheMicrosecond: Postgres keeps microseconds. A
// price or override starting 100 ns after another was compared with it to
// the nanosecond, then stored at the same microsecond: the second got a 409
// naming no version ("price for m already exists"), and the first's answer
// showed a start the ledger does not hold. A credit retried with its
// idempotency key and a time with nanoseconds never matched its first
// request's stored time. A key another customer used, given with an unknown
// customer, answered 409 showing the other's entry, not 404. (Found by
// review.)
func TestInputTimesAreKeptToTheMicrosecond(t *testing.T) {
	b := newBilling(t, nil)
	ns := jan.Add(100 * time.Nanosecond)
	p, err := b.s.CreatePrice(b.ctx, ledger.PriceInput{Model: "ns", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: ns})
	if err != nil || !p.EffectiveFrom.Equal(jan) {
		t.Fatalf("CreatePrice from %s = %+v, %v; want it from %s, as stored", ns.Format(time.RFC3339Nano), p, err, jan.Format(time.RFC3339Nano))
	}
	_, err = b.s.CreatePrice(b.ctx, ledger.PriceInput{Model: "ns", Currency: "USD", Input: "2", Output: "2", EffectiveFrom: jan.Add(200 * time.Nanosecond)})
	if ledger.ErrorCode(err) != ledger.EConflict || !strings.Contains(err.Error(), "overlaps price version") {
		t.Errorf("a second price at the same microsecond: %v; want the conflict naming the version", err)
	}

	o, err := b.s.CreateOverride(b.ctx, b.c.ID, ledger.OverrideInput{Model: "ns", DiscountPercent: "10", EffectiveFrom: ns})
	if err != nil || !o.EffectiveFrom.Equal(jan) {
		t.Fatalf("CreateOverride from %s = %+v, %v; want it from %s", ns.Format(time.RFC3339Nano), o, err, jan.Format(time.RFC3339Nano))
	}
	// A custom price may repeat its override's times, given to the
	// nanosecond: they are the same times.
	end := ns.Add(24 * time.Hour)
	_, err = b.s.CreateOverride(b.ctx, b.c.ID, ledger.OverrideInput{Model: "ns-custom", EffectiveFrom: ns, EffectiveTo: &end,
		Price: &ledger.PriceInput{Currency: "USD", Input: "1", Output: "1", EffectiveFrom: ns, EffectiveTo: &end}})
	if err != nil {
		t.Errorf("an override whose price repeats its times: %v", err)
	}
	_, err = b.s.CreateOverride(b.ctx, b.c.ID, ledger.OverrideInput{Model: "ns", DiscountPercent: "20", EffectiveFrom: jan.Add(200 * time.Nanosecond)})
	if ledger.ErrorCode(err) != ledger.EConflict || !strings.Contains(err.Error(), "overlaps override") {
		t.Errorf("a second override at the same microsecond: %v; want the conflict naming the override", err)
	}

	in := ledger.EntryInput{Amount: "1", EffectiveAt: ns.Add(time.Hour), IdempotencyKey: "retried"}
	first, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, in)
	if err != nil || again.ID != first.ID {
		t.Errorf("the same credit again = %+v, %v; want entry %d", again, err, first.ID)
	}
	// The key is another customer's: an unknown customer is not found, and
	// the answer shows nothing of the other's entry.
	_, err = b.s.AddEntry(b.ctx, "00000000-0000-4000-8000-000000000000", ledger.KindCredit, in)
	if ledger.ErrorCode(err) != ledger.ENotFound {
		t.Errorf("a credit with the key to an unknown customer: %v; want not found", err)
	}
}
