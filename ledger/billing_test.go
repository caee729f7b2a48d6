package ledger_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

func usageByMonth(t *testing.T, s *ledger.Store, customer string) map[string]ledger.UsageRow {
	t.Helper()
	page, err := s.Usage(context.Background(), ledger.UsageQuery{CustomerID: customer, GroupBy: "month"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]ledger.UsageRow{}
	for _, r := range page.Data {
		out[r.Period+"/"+r.Currency] = r
	}
	return out
}

// TestLateEventLandsInItsOwnPeriod: an event from last month written today
// is in last month's usage, priced at last month's price.
func TestLateEventLandsInItsOwnPeriod(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	lastMonth := thisMonth.AddDate(0, -1, 0)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: lastMonth}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "2", Output: "2", EffectiveFrom: thisMonth}); err != nil {
		t.Fatal(err)
	}
	late := newEvent(c.ID, k.ID, "m", thisMonth.Add(-time.Minute), usage.Tokens{PromptTokens: 1000})
	if _, err := s.WriteEvents(ctx, []usage.Event{late}); err != nil {
		t.Fatal(err)
	}
	got := usageByMonth(t, s, c.ID)
	if r := got[lastMonth.Format("2006-01")+"/USD"]; r.Requests != 1 || r.Cost != "0.001" || len(got) != 1 {
		t.Fatalf("usage by month = %+v, want the late event in %s at last month's price", got, lastMonth.Format("2006-01"))
	}
}

// TestUnpricedThenRerated: an event with no price is stored unpriced at 0,
// never dropped; once a price is added, re-rating prices it with an entry,
// the rollups and balance follow, and re-rating again changes nothing.
func TestUnpricedThenRerated(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	e := newEvent(c.ID, k.ID, "new-model", at, usage.Tokens{PromptTokens: 2000, CompletionTokens: 500})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Event(ctx, e.ID); err != nil || !got.Unpriced || got.Cost != "0" || got.ListCost != "0" {
		t.Fatalf("event = %+v, %v; want unpriced at 0", got, err)
	}
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "new-model", Currency: "USD", Input: "3", Output: "15",
		EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Rerate(ctx, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), nil)
	if err != nil || res.Examined != 1 || res.Adjusted != 1 || res.Priced != 1 {
		t.Fatalf("Rerate = %+v, %v", res, err)
	}
	// 2000 × 3 + 500 × 15 = 13500 micro-units = 0.0135.
	got := usageByMonth(t, s, c.ID)
	if r := got["2026-03/USD"]; r.Requests != 1 || r.Cost != "0.0135" || r.UnpricedRequests != 0 || r.PromptTokens != 2000 {
		t.Fatalf("usage after rerate = %+v", got)
	}
	if r, ok := got["2026-03/"]; ok {
		t.Fatalf("the month shows an unpriced row beside its priced one: %+v", r)
	}
	b, err := s.Balance(ctx, c.ID)
	if err != nil || b.Charges != "0.0135" {
		t.Fatalf("balance = %+v, %v", b, err)
	}
	// The stored event is as first rated; its cost is what it is charged now.
	if ev, _ := s.Event(ctx, e.ID); !ev.Unpriced || ev.ListCost != "0" || ev.Charge != "0" || ev.Cost != "0.0135" || ev.Currency != "USD" {
		t.Fatalf("event after re-rating = %+v, want list cost and charge 0 as stored, cost 0.0135 USD", ev)
	}
	res, err = s.Rerate(ctx, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), nil)
	if err != nil || res.Adjusted != 0 {
		t.Fatalf("second Rerate = %+v, %v; want nothing to adjust", res, err)
	}
}

// TestOverridesAndPromotions: a customer's discount and custom price, new
// terms from a later date, and bounded promotional prices and terms, each
// rate events exactly.
func TestOverridesAndPromotions(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mustPrice := func(in ledger.PriceInput) {
		t.Helper()
		if _, err := s.CreatePrice(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	mustPrice(ledger.PriceInput{Model: "m", Currency: "USD", Input: "10", Output: "10", Reasoning: "20", RequestFee: "0.001", WebSearch: "0.01", EffectiveFrom: jan})
	promoEnd := jan.AddDate(0, 0, 7)
	mustPrice(ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: jan.AddDate(0, 0, 1), EffectiveTo: &promoEnd})
	// A second bounded window overlapping the promotion is refused.
	end2 := jan.AddDate(0, 0, 10)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1",
		EffectiveFrom: jan.AddDate(0, 0, 5), EffectiveTo: &end2}); ledger.ErrorCode(err) != ledger.EConflict {
		t.Fatalf("overlapping promotion: %v, want conflict", err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "", DiscountPercent: "12.5", EffectiveFrom: jan.AddDate(0, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", Price: &ledger.PriceInput{Currency: "USD", Input: "5", Output: "5"},
		EffectiveFrom: jan.AddDate(0, 2, 0)}); err != nil {
		t.Fatal(err)
	}
	// A discount for every model from the same start says so; it read
	// `for model ""`.
	_, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{DiscountPercent: "5", EffectiveFrom: jan.AddDate(0, 1, 0)})
	if ledger.ErrorCode(err) != ledger.EConflict || !strings.Contains(err.Error(), "for every model (") {
		t.Fatalf("a discount for every model from the same start: %v; want a conflict naming every model", err)
	}
	_, err = s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "5", EffectiveFrom: jan.AddDate(0, 2, 0)})
	if ledger.ErrorCode(err) != ledger.EConflict || !strings.Contains(err.Error(), `for model "m" (`) {
		t.Fatalf("an override for m from the same start: %v; want a conflict naming the model", err)
	}
	// New terms take over from their start, as price versions do: they
	// were refused as overlapping the open-ended terms before them, which
	// then applied forever (found by review). A 5% discount for every
	// model from April (m keeps its custom price: a model's own terms
	// win), 20% off m from May replacing its custom price, and 50% off m
	// for ten days of May, after which the 20% resumes.
	may10, may20 := jan.AddDate(0, 4, 9), jan.AddDate(0, 4, 19)
	for _, in := range []ledger.OverrideInput{
		{DiscountPercent: "5", EffectiveFrom: jan.AddDate(0, 3, 0)},
		{Model: "m", DiscountPercent: "20", EffectiveFrom: jan.AddDate(0, 4, 0)},
		{Model: "m", DiscountPercent: "50", EffectiveFrom: may10, EffectiveTo: &may20},
	} {
		if _, err := s.CreateOverride(ctx, c.ID, in); err != nil {
			t.Fatalf("CreateOverride %+v: %v", in, err)
		}
	}
	may15 := jan.AddDate(0, 4, 14)
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "60", EffectiveFrom: may15, EffectiveTo: &may20}); ledger.ErrorCode(err) != ledger.EConflict {
		t.Fatalf("a window overlapping another of m: %v, want a conflict", err)
	}
	u := usage.Tokens{PromptTokens: 1000, CompletionTokens: 300, ReasoningTokens: 100, WebSearchRequests: 2}
	cases := []struct {
		at                 time.Time
		listCost, charge   string
		discount, unpriced int
	}{
		// list: 1000×10 + 200×10 + 100×20 = 14000 µ + fee 1000 µ + 2×10000 µ = 35000 µ.
		{jan.Add(time.Hour), "0.035", "0.035", 0, 0},
		// promotion (no reasoning price, no fee): 1000 + 300 = 1300 µ.
		{jan.AddDate(0, 0, 2), "0.0013", "0.0013", 0, 0},
		// after the promotion, the open-ended list price again.
		{jan.AddDate(0, 0, 8), "0.035", "0.035", 0, 0},
		// February: 12.5% off the list price: 0.035 × 0.875 = 0.030625.
		{jan.AddDate(0, 1, 1), "0.035", "0.030625", 1250, 0},
		// March: the custom price: 1000×5 + 300×5 = 6500 µ, no discount.
		{jan.AddDate(0, 2, 1), "0.0065", "0.0065", 0, 0},
		// April: m's custom price still, over the 5% for every model.
		{jan.AddDate(0, 3, 1), "0.0065", "0.0065", 0, 0},
		// May: 20% off m's list price: 0.035 × 0.8.
		{jan.AddDate(0, 4, 1), "0.035", "0.028", 2000, 0},
		// Its ten days at 50%, then 20% again.
		{may15, "0.035", "0.0175", 5000, 0},
		{may20, "0.035", "0.028", 2000, 0},
	}
	for _, tc := range cases {
		e := newEvent(c.ID, k.ID, "m", tc.at, u)
		if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Event(ctx, e.ID)
		if err != nil || got.ListCost != tc.listCost || got.Charge != tc.charge || got.Cost != tc.charge || got.DiscountBP != tc.discount {
			t.Fatalf("event at %s = list cost %s charge %s cost %s discount %d, %v; want %s %s %s %d", tc.at,
				got.ListCost, got.Charge, got.Cost, got.DiscountBP, err, tc.listCost, tc.charge, tc.charge, tc.discount)
		}
	}
	b, err := s.Balance(ctx, c.ID)
	if err != nil || b.Charges != "0.188425" { // 0.035+0.0013+0.035+0.030625+0.0065 + 0.0065+0.028+0.0175+0.028
		t.Fatalf("balance = %+v, %v", b, err)
	}
}

// TestLargeDiscountedChargeIsExact: a discounted charge keeps every decimal
// however large the event (Postgres numeric division would round).
func TestLargeDiscountedChargeIsExact(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "big", Currency: "USD", Input: "0", Output: "1000.000001", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{DiscountPercent: "0.01", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	e := newEvent(c.ID, k.ID, "big", jan.Add(time.Hour), usage.Tokens{CompletionTokens: 123444443})
	if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Event(ctx, e.ID)
	// list cost = 123444443 × 1000000001 e-12 = 123444.443123444443; × 0.9999:
	if err != nil || got.ListCost != "123444.443123444443" || got.Charge != "123432.0986791320985557" || got.Cost != got.Charge {
		t.Fatalf("event = list cost %s charge %s cost %s, %v", got.ListCost, got.Charge, got.Cost, err)
	}
	b, err := s.Balance(ctx, c.ID)
	if err != nil || b.Charges != got.Charge {
		t.Fatalf("balance charges %s, want %s (%v)", b.Charges, got.Charge, err)
	}
}

// TestConcurrentReratesChargeOnce: two re-ratings of the same range at
// once (a retry after a client timeout, two operators) charge the
// difference once: re-rating is idempotent, at the same time too.
func TestConcurrentReratesChargeOnce(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	var evs []usage.Event
	for i := range 500 {
		evs = append(evs, newEvent(c.ID, k.ID, "m", at.Add(time.Duration(i)*time.Second), usage.Tokens{PromptTokens: 1000}))
	}
	if _, err := s.WriteEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	// The price comes after the fact: every event is unpriced, then re-rated.
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: at.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]ledger.RerateResult, 2)
	for i := range results {
		wg.Go(func() {
			<-start
			var err error
			if results[i], err = s.Rerate(ctx, at.Add(-time.Hour), at.Add(time.Hour), nil); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	b, err := s.Balance(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 500 events × 1,000 tokens × USD 1 per million tokens = USD 0.5.
	if b.Charges != "0.5" || results[0].Adjusted+results[1].Adjusted != 500 {
		t.Fatalf("after two concurrent re-ratings: balance %+v, results %+v: want charges of 0.5, 500 events adjusted once", b, results)
	}
}

// TestOverridesApplyWhateverTheCaseOfTheCustomerID: Validate takes a
// customer_id in upper case, and the ledger stores and bills it as the
// same customer (a uuid column), but its overrides were keyed by
// Postgres' lower-case text and looked up by the event's own spelling:
// the customer's discount was skipped and the event charged list price.
func TestOverridesApplyWhateverTheCaseOfTheCustomerID(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{DiscountPercent: "50", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	at := jan.AddDate(0, 1, 0)
	lower := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 1_000_000})
	upper := newEvent(strings.ToUpper(c.ID), k.ID, "m", at, usage.Tokens{PromptTokens: 1_000_000})
	for _, e := range []usage.Event{lower, upper} {
		if err := e.Validate(); err != nil {
			t.Fatalf("the event is invalid: %v", err)
		}
		if _, err := s.WriteEvents(ctx, []usage.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []usage.Event{lower, upper} {
		bp, err := s.QueryInt64ForTest(ctx, `SELECT discount_bp FROM usage_events WHERE id = '`+e.ID+`'`)
		if err != nil {
			t.Fatal(err)
		}
		if bp != 5000 {
			t.Errorf("event with customer_id %q: discount_bp = %d, want 5000 (the customer's 50%% discount)", e.CustomerID, bp)
		}
	}
}

// rollupAmounts is a customer's usage_hourly list cost and charge in a
// currency, in currency units.
func rollupAmounts(t *testing.T, conn *pgx.Conn, customer, currency string) (list, charge decimal.Decimal) {
	t.Helper()
	var l, c string
	if err := conn.QueryRow(context.Background(), `SELECT (coalesce(sum(cost_e12), 0) / 1e12)::text,
		(coalesce(sum(charge_e12), 0) / 1e12)::text FROM usage_hourly WHERE customer_id = $1 AND currency = $2`,
		customer, currency).Scan(&l, &c); err != nil {
		t.Fatal(err)
	}
	return dec(t, l), dec(t, c)
}

// TestRerateMovesTheRollupsListCost: re-rating a priced event moves
// usage_hourly.cost_e12 (the list cost the Billing dashboard's "Top
// customers" panel shows) by the list cost's difference, as well as
// charge_e12, even when the charge does not move (a 100% discount); and
// reconciliation compares the rollups' list cost with the events' (as
// first rated) plus their rerate entries'. (Found by a review: after a
// price correction, the rollup said list 10, charge 1, with no discount,
// and reconciliation did not look.)
func TestRerateMovesTheRollupsListCost(t *testing.T) {
	s, url := ledgertest.NewStoreURL(t)
	ctx := context.Background()
	b, free := newBilling(t, s), newBilling(t, s)
	if _, err := s.CreateOverride(ctx, free.c.ID, ledger.OverrideInput{DiscountPercent: "100", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	b.price("m", "USD", "0", "10", "") // 10 per million output tokens, from January
	b.write(b.event("m", jan.Add(20*24*time.Hour), usage.Tokens{CompletionTokens: 1_000_000}))
	free.write(free.event("m", jan.Add(20*24*time.Hour), usage.Tokens{CompletionTokens: 1_000_000}))
	// The book was wrong from the 10th: 1, not 10.
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "0", Output: "1",
		EffectiveFrom: jan.Add(9 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Rerate(ctx, jan, feb, nil)
	if err != nil || res.Adjusted != 2 {
		t.Fatalf("Rerate = %+v, %v; want both events adjusted (the free one's list cost moves)", res, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, c := range []struct {
		who          *billing
		list, charge string
	}{{b, "1", "1"}, {free, "1", "0"}} {
		list, charge := rollupAmounts(t, conn, c.who.c.ID, "USD")
		if !list.Equal(dec(t, c.list)) || !charge.Equal(dec(t, c.charge)) {
			t.Errorf("usage_hourly of %s after re-rating: list cost %s, charge %s; want %s, %s",
				c.who.c.Name, list, charge, c.list, c.charge)
		}
	}
	if again, err := s.Rerate(ctx, jan, feb, nil); err != nil || again.Adjusted != 0 {
		t.Errorf("re-rating again = %+v, %v; want nothing adjusted", again, err)
	}
	rec, err := s.Reconcile(ctx, jan, feb)
	if err != nil || !rec.Clean {
		t.Fatalf("reconciliation after re-rating = %+v, %v; want clean", rec, err)
	}
	if _, err := conn.Exec(ctx, `UPDATE usage_hourly SET cost_e12 = cost_e12 * 1000 WHERE customer_id = $1`, b.c.ID); err != nil {
		t.Fatal(err)
	}
	rec, err = s.Reconcile(ctx, jan, feb)
	if err != nil || rec.Clean || rec.RollupMismatchCount != 1 || !slices.Equal(rec.RollupMismatches[0].Fields, []string{"list_cost"}) ||
		rec.RollupMismatches[0].Events.ListCost != "1" || rec.RollupMismatches[0].Rollup.ListCost != "1000" {
		t.Errorf("reconciliation with usage_hourly.cost_e12 × 1000 = %+v, %v; want one list_cost mismatch, 1 against 1000", rec, err)
	}
}
