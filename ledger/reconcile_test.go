package ledger_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// refPrice is a price in micro-units, for the reference computation.
type refPrice struct{ input, cached, write, output, reasoning, fee, search int64 }

// refCharge is the documented formula in arbitrary precision, in currency
// units: cost = Σ tokens × micros per class (1e-12 units), charge =
// cost × (10000 − bp) / 10000.
func refCharge(u usage.Tokens, p refPrice, bp int64) *big.Rat {
	cost := new(big.Int)
	for _, t := range [][2]int64{{u.PromptTokens - u.CachedTokens - u.CacheWriteTokens, p.input}, {u.CachedTokens, p.cached},
		{u.CacheWriteTokens, p.write}, {u.CompletionTokens - u.ReasoningTokens, p.output}, {u.ReasoningTokens, p.reasoning},
		{1_000_000, p.fee}, {u.WebSearchRequests * 1_000_000, p.search}} {
		cost.Add(cost, new(big.Int).Mul(big.NewInt(t[0]), big.NewInt(t[1])))
	}
	charge := new(big.Rat).SetFrac(cost.Mul(cost, big.NewInt(10000-bp)), big.NewInt(10000))
	return charge.Quo(charge, new(big.Rat).SetInt64(1e12))
}

func micros(m int64) string { return ledger.FormatMicros(m) }

func TestStatementMatchesReferenceCharges(t *testing.T) {
	b := newBilling(t, nil)
	r := rand.New(rand.NewPCG(7, 11))
	prices := map[string]refPrice{}
	for _, m := range []string{"m0", "m1", "m2", "m3"} {
		p := refPrice{input: r.Int64N(20_000_000), cached: r.Int64N(5_000_000), write: r.Int64N(30_000_000),
			output: r.Int64N(80_000_000), fee: r.Int64N(3_000), search: r.Int64N(30_000)}
		p.reasoning = r.Int64N(90_000_000)
		in := ledger.PriceInput{Model: m, Currency: "USD", Input: micros(p.input), CachedInput: micros(p.cached),
			CacheWrite: micros(p.write), Output: micros(p.output), Reasoning: micros(p.reasoning),
			RequestFee: micros(p.fee), WebSearch: micros(p.search), EffectiveFrom: jan}
		if m == "m3" { // reasoning billed as output
			in.Reasoning, p.reasoning = "", p.output
		}
		if _, err := b.s.CreatePrice(b.ctx, in); err != nil {
			t.Fatal(err)
		}
		prices[m] = p
	}
	allBP, m1BP, mid := r.Int64N(10001), r.Int64N(10001), jan.Add(14*24*time.Hour)
	custom := refPrice{input: 1_234_567, cached: 7, write: 3, output: 9_876_543, reasoning: 9_876_543, fee: 1}
	for _, o := range []ledger.OverrideInput{
		{DiscountPercent: decimalBP(allBP), EffectiveFrom: jan},
		{Model: "m1", DiscountPercent: decimalBP(m1BP), EffectiveFrom: mid},
		{Model: "m2", EffectiveFrom: jan, Price: &ledger.PriceInput{Currency: "USD", Input: micros(custom.input),
			CachedInput: micros(custom.cached), CacheWrite: micros(custom.write), Output: micros(custom.output), RequestFee: micros(custom.fee)}},
	} {
		if _, err := b.s.CreateOverride(b.ctx, b.c.ID, o); err != nil {
			t.Fatal(err)
		}
	}
	want := new(big.Rat)
	var events []usage.Event
	for range 200 {
		prompt, completion := r.Int64N(300_000), r.Int64N(60_000)
		cached := r.Int64N(prompt + 1)
		u := usage.Tokens{PromptTokens: prompt, CachedTokens: cached, CacheWriteTokens: r.Int64N(prompt - cached + 1),
			CompletionTokens: completion, ReasoningTokens: r.Int64N(completion + 1), WebSearchRequests: r.Int64N(3)}
		model := []string{"m0", "m1", "m2", "m3", "unpriced"}[r.IntN(5)]
		at := jan.Add(time.Duration(r.Int64N(int64(31 * 24 * time.Hour))))
		switch bp := allBP; {
		case model == "m2":
			want.Add(want, refCharge(u, custom, 0))
		case model == "unpriced":
		default:
			if model == "m1" && !at.Before(mid) {
				bp = m1BP
			}
			want.Add(want, refCharge(u, prices[model], bp))
		}
		events = append(events, b.event(model, at, u))
	}
	b.write(events...)
	st := b.statement("2026-01")
	got, ok := new(big.Rat).SetString(st.Sections[0].ExactTotal)
	if !ok || got.Cmp(want) != 0 || len(st.Sections) != 1 || len(st.Unpriced) != 1 {
		t.Fatalf("exact total = %s, want %s (discounts %d, %d bp)", st.Sections[0].ExactTotal, want.FloatString(20), allBP, m1BP)
	}
	if rec, err := b.s.Reconcile(b.ctx, jan, feb); err != nil || !rec.Clean {
		t.Fatalf("Reconcile = %+v, %v", rec, err)
	}
}

func decimalBP(bp int64) string { return fmt.Sprintf("%d.%02d", bp/100, bp%100) }

// ledgerFixture is a January with priced, discounted and unpriced events,
// a duplicate delivery, a credit, an adjustment and a refund.
func ledgerFixture(t *testing.T) (*billing, []usage.Event) {
	b := newBilling(t, nil)
	b.s.UseClockForTest(func() time.Time { return jan.Add(10 * 24 * time.Hour) })
	b.price("m", "USD", "2.5", "10", "")
	if _, err := b.s.CreateOverride(b.ctx, b.c.ID, ledger.OverrideInput{DiscountPercent: "3.33", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	var evs []usage.Event
	for i := range 30 {
		model := "m"
		if i == 7 {
			model = "new-model"
		}
		evs = append(evs, b.event(model, jan.Add(time.Duration(i)*97*time.Minute), usage.Tokens{PromptTokens: int64(1000 + i), CompletionTokens: int64(7 * i)}))
	}
	b.write(append(evs, evs[3])...)
	b.write(b.event("m", feb.Add(time.Hour), usage.Tokens{PromptTokens: 5})) // outside January
	if _, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "20", EffectiveAt: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindAdjustment, ledger.EntryInput{Amount: "-0.1", Memo: "a \"quoted\", multi\nline memo", EffectiveAt: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.RefundEvent(b.ctx, evs[0].ID, "refund"); err != nil {
		t.Fatal(err)
	}
	return b, evs
}

func TestReconcile(t *testing.T) {
	b, evs := ledgerFixture(t)
	rec, err := b.s.Reconcile(b.ctx, jan, feb)
	if err != nil || !rec.Clean || rec.Events != 30 || rec.EventIDs != 30 || rec.DuplicatesRejected != 1 || rec.UnpricedEvents != 1 ||
		!reflect.DeepEqual(rec.Unpriced, []ledger.UnpricedModel{{Model: "new-model", Events: 1}}) {
		t.Fatalf("Reconcile = %+v, %v", rec, err)
	}
	// A price for the new model, and a January promotion that re-rates the rest.
	b.price("new-model", "USD", "1", "1", "")
	to := jan.Add(12 * time.Hour)
	if _, err := b.s.CreatePrice(b.ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: jan.Add(time.Minute), EffectiveTo: &to}); err != nil {
		t.Fatal(err)
	}
	if res, err := b.s.Rerate(b.ctx, jan, feb, nil); err != nil || res.Priced != 1 || res.Adjusted < 2 {
		t.Fatalf("Rerate = %+v, %v", res, err)
	}
	rec, err = b.s.Reconcile(b.ctx, jan, feb)
	if err != nil || !rec.Clean || rec.UnpricedEvents != 0 || len(rec.Unpriced) != 0 {
		t.Fatalf("after re-rating: Reconcile = %+v, %v", rec, err)
	}
	// Statements read the re-rated rollups, never the rerate entries again:
	// they chain from month to month into the running balance.
	janSt, febSt := b.statement("2026-01"), b.statement("2026-02")
	bal, err := b.s.Balance(b.ctx, b.c.ID)
	if err != nil || janSt.Sections[0].ClosingBalance != febSt.Sections[0].OpeningBalance || febSt.Sections[0].ClosingBalance != bal.Balance {
		t.Fatalf("January closes at %s, February opens at %s and closes at %s; balance %+v, %v", janSt.Sections[0].ClosingBalance,
			febSt.Sections[0].OpeningBalance, febSt.Sections[0].ClosingBalance, bal, err)
	}
	tamper := func(sql string) {
		t.Helper()
		if err := b.s.ExecForTest(b.ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	tamper(`UPDATE usage_hourly SET prompt_tokens = prompt_tokens + 1, charge_e12 = charge_e12 + 1 WHERE hour = '2026-01-01T03:00:00Z'`)
	tamper(`UPDATE customer_balances SET credits_e12 = credits_e12 - 1`)
	tamper(fmt.Sprintf(`DELETE FROM event_ids WHERE id = '%s'`, evs[5].ID))
	// The same id stored again in another month's partition.
	tamper(fmt.Sprintf(`CREATE TEMP TABLE d AS SELECT * FROM usage_events WHERE id = '%s';
		UPDATE d SET occurred_at = occurred_at + interval '31 days'; INSERT INTO usage_events SELECT * FROM d`, evs[9].ID))
	rec, err = b.s.Reconcile(b.ctx, jan, feb.Add(28*24*time.Hour))
	if err != nil || rec.Clean || rec.RollupMismatchCount != 2 || rec.EventsWithoutID != 2 || rec.DuplicateIDs != 1 ||
		rec.IDsWithoutEvent != 0 || len(rec.BalanceMismatches) != 1 ||
		!dec(t, rec.BalanceMismatches[0].Expected.Credits).Sub(dec(t, rec.BalanceMismatches[0].Stored.Credits)).Equal(decimal.New(1, -12)) {
		t.Fatalf("after tampering: Reconcile = %+v, %v", rec, err)
	}
	m := rec.RollupMismatches[0]
	if !m.Hour.Equal(jan.Add(3*time.Hour)) || m.CustomerID != b.c.ID || !reflect.DeepEqual(m.Fields, []string{"prompt_tokens", "charge"}) ||
		m.Rollup.PromptTokens != m.Events.PromptTokens+1 {
		t.Fatalf("mismatch = %+v", m)
	}
	if _, err := b.s.Reconcile(b.ctx, feb, jan); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Fatalf("reversed range: %v", err)
	}
}

func TestExportLines(t *testing.T) {
	b, evs := ledgerFixture(t)
	var buf bytes.Buffer
	var progress []int64
	n, err := b.s.ExportLines(b.ctx, jan, feb, &buf, func(rows int64) { progress = append(progress, rows) })
	if err != nil || n != 33 || !reflect.DeepEqual(progress, []int64{33}) {
		t.Fatalf("ExportLines = %d, %v, progress %v; want 30 events and 3 entries", n, err, progress)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(recs) != 34 || !reflect.DeepEqual(recs[0], ledger.ExportColumns) {
		t.Fatalf("CSV: %v, %d rows, header %v", err, len(recs), recs[0])
	}
	col := map[string]int{}
	for i, c := range recs[0] {
		col[c] = i
	}
	byEvent := map[string][]string{}
	entries := map[string]string{}
	for _, r := range recs[1:] {
		if r[col["record"]] == "event" {
			byEvent[r[col["event_id"]]] = r
		} else {
			entries[r[col["kind"]]] = r[col["amount"]] + "|" + r[col["memo"]]
		}
	}
	for _, e := range evs {
		got, ok := byEvent[e.ID]
		want, err := b.s.Event(b.ctx, e.ID)
		if err != nil || !ok {
			t.Fatalf("event %s: %v, exported %v", e.ID, err, ok)
		}
		at, _ := time.Parse(time.RFC3339Nano, got[col["time"]])
		if !at.Equal(e.Time) || !dec(t, got[col["list_cost"]]).Equal(dec(t, want.ListCost)) || !dec(t, got[col["charge"]]).Equal(dec(t, want.Charge)) ||
			got[col["prompt_tokens"]] != fmt.Sprint(e.Usage.PromptTokens) || got[col["unpriced"]] != fmt.Sprint(want.Unpriced) {
			t.Errorf("event row %v, want %+v", got, want)
		}
	}
	if entries["credit"] != "20|" || entries["adjustment"] != "-0.1|a \"quoted\", multi\nline memo" || entries["refund"] == "" {
		t.Errorf("entries = %q", entries)
	}
	if _, err := b.s.ExportLines(b.ctx, feb, jan, io.Discard); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Errorf("reversed range: %v", err)
	}
}

// TestExportLinesStreams exports more rows than fit the allocation budget
// were they held in memory.
func TestExportLinesStreams(t *testing.T) {
	b := newBilling(t, nil)
	b.price("m", "USD", "1", "2", "")
	for batch := range 3 {
		evs := make([]usage.Event, 5000)
		for i := range evs {
			evs[i] = b.event("m", jan.Add(time.Duration(batch*5000+i)*time.Second), usage.Tokens{PromptTokens: int64(i), CompletionTokens: 3})
		}
		b.write(evs...)
	}
	var calls int
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cw := &countingWriter{}
	n, err := b.s.ExportLines(b.ctx, jan, feb, cw, func(int64) { calls++ })
	runtime.ReadMemStats(&ms1)
	if err != nil || n != 15000 || calls != 2 {
		t.Fatalf("ExportLines = %d, %v with %d progress calls", n, err, calls)
	}
	alloc := ms1.TotalAlloc - ms0.TotalAlloc
	t.Logf("exported %d rows, %d bytes, allocating %d bytes", n, cw.n, alloc)
	if alloc > cw.n/4 {
		t.Fatalf("exporting %d bytes allocated %d bytes: not streaming", cw.n, alloc)
	}
}

type countingWriter struct{ n uint64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += uint64(len(p)); return len(p), nil }

// TestReconcileNamesEventsOfUnknownOwners: an event published on the
// usage subject for a customer the ledger does not hold, or with another
// customer's key, was stored and rated, and reconciliation said nothing of
// it: money on no statement, a key on a bill it is not the customer's.
// Reconciliation now counts both. (Found by review.)
func TestReconcileNamesEventsOfUnknownOwners(t *testing.T) {
	b := newBilling(t, nil)
	other := newBilling(t, b.s)
	b.price("own", "USD", "1", "1", "")
	at := jan.Add(time.Hour)
	stranger := b.event("own", at, usage.Tokens{PromptTokens: 10})
	stranger.CustomerID = "99999999-9999-4999-8999-999999999999"
	borrowed := b.event("own", at, usage.Tokens{PromptTokens: 10})
	borrowed.KeyID = other.k.ID
	b.write(b.event("own", at, usage.Tokens{PromptTokens: 10}), stranger, borrowed)
	rec, err := b.s.Reconcile(b.ctx, jan, jan.Add(24*time.Hour))
	if err != nil || rec.UnknownCustomerEvents != 1 || rec.ForeignKeyEvents != 1 || rec.Events != 3 {
		t.Fatalf("reconciliation %+v, %v; want 3 events, 1 of an unknown customer, 1 of another customer's key", rec, err)
	}
}
