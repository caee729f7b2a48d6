package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestStatesCarryWhatIsLeft: a key's state carries its spend limits and its
// spend of the day and month (micro-units, rounded up), and a customer's
// with a credit limit what it may still spend (balance + credit limit,
// rounded down): what a gateway holds its requests in flight against
// (gateway's spend holds). Before, a state said only blocked or not, and a
// gateway admitted every request sent together until the ledger's count
// crossed the limit.
func TestStatesCarryWhatIsLeft(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	ledgertest.AwayFromMidnight(t)
	now := time.Now().UTC()
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "0",
		EffectiveFrom: now.AddDate(0, -2, 0)}); err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "credit", CreditLimit: new("1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "0.5"}); err != nil {
		t.Fatal(err)
	}
	k, secret, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "limited", DailyLimit: new("2.5"), MonthlyLimit: new("10")})
	if err != nil {
		t.Fatal(err)
	}
	_, plainSecret, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	// At 1 USD per 1M tokens a token is a micro-unit: 1,234 today, 1,000
	// yesterday (the month's spend, not the day's).
	evs := []usage.Event{newEvent(c.ID, k.ID, "m", now, usage.Tokens{PromptTokens: 1234}),
		newEvent(c.ID, k.ID, "m", now.AddDate(0, 0, -1), usage.Tokens{PromptTokens: 1000})}
	if now.Day() == 1 { // yesterday was last month: keep both in this month's spend
		evs[1].Time = now
	}
	if _, err := s.WriteEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	st, cu, ok, err := s.KeyState(ctx, usage.KeyHash(secret))
	if err != nil || !ok {
		t.Fatalf("KeyState: %v, %v", ok, err)
	}
	day, month := int64(1234), int64(2234)
	if now.Day() == 1 {
		day = 2234
	}
	if st.DailyLimitMicros == nil || *st.DailyLimitMicros != 2_500_000 || st.MonthlyLimitMicros == nil ||
		*st.MonthlyLimitMicros != 10_000_000 || st.DaySpentMicros != day || st.MonthSpentMicros != month {
		t.Fatalf("limited key's state: limits %v %v, spent %d %d; want 2500000 10000000, spent %d %d",
			ptr(st.DailyLimitMicros), ptr(st.MonthlyLimitMicros), st.DaySpentMicros, st.MonthSpentMicros, day, month)
	}
	// 0.5 credit + 1 credit limit − 0.002234 charged.
	if cu.CreditLeftMicros == nil || *cu.CreditLeftMicros != 1_500_000-2234 {
		t.Fatalf("customer's credit left = %v; want %d", ptr(cu.CreditLeftMicros), 1_500_000-2234)
	}
	st, _, _, err = s.KeyState(ctx, usage.KeyHash(plainSecret))
	if err != nil || st.DailyLimitMicros != nil || st.MonthlyLimitMicros != nil || st.DaySpentMicros != 0 {
		t.Fatalf("a key without limits: %+v, %v", st, err)
	}
	// A fraction of a micro-unit: spend rounds up, credit left down.
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "frac", Currency: "USD", Input: "0.5", Output: "0",
		EffectiveFrom: now.AddDate(0, -2, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "frac", now, usage.Tokens{PromptTokens: 1})}); err != nil {
		t.Fatal(err)
	}
	st, cu, _, err = s.KeyState(ctx, usage.KeyHash(secret))
	if err != nil || st.DaySpentMicros != day+1 || st.MonthSpentMicros != month+1 || *cu.CreditLeftMicros != 1_500_000-2234-1 {
		t.Fatalf("after half a micro-unit: spent %d %d, credit left %v; want %d %d, %d (%v)",
			st.DaySpentMicros, st.MonthSpentMicros, ptr(cu.CreditLeftMicros), day+1, month+1, 1_500_000-2234-1, err)
	}
	// A customer without a credit limit has none to hold.
	plain, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	_, ps, err := s.CreateKey(ctx, plain.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, cu, _, err := s.KeyState(ctx, usage.KeyHash(ps)); err != nil || cu.CreditLeftMicros != nil {
		t.Fatalf("no credit limit: credit left %v, %v; want none", ptr(cu.CreditLeftMicros), err)
	}
}

// ptr is *p, or -1 for nil, for messages.
func ptr(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// TestCustomerStatesAsCreditHalves: a prepaid customer's state is
// published each time what it has left halves (to a power of two
// micro-units), and when it is spent. Published at shares of its credits
// instead, after a top-up of 10 USD on 99 of 100 spent no share of 110
// was crossed before 0: gateways learned nothing of the customer's spend
// until it was blocked (found by review).
func TestCustomerStatesAsCreditHalves(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1000", Output: "0",
		EffectiveFrom: now.AddDate(0, -2, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateCustomer(ctx, c.ID, ledger.CustomerPatch{SetCreditLimit: true, CreditLimit: new("0")}); err != nil {
		t.Fatal(err)
	}
	spend := func(usd int64) usage.Changes {
		t.Helper()
		if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", now, usage.Tokens{PromptTokens: usd * 1000})}); err != nil {
			t.Fatal(err)
		}
		return drainChanges(t, s)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "100"}); err != nil {
		t.Fatal(err)
	}
	spend(99)
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "10"}); err != nil {
		t.Fatal(err)
	}
	drainChanges(t, s) // the top-up's state: 11 USD left
	var got []string
	for range 11 {
		for _, cu := range spend(1).Customers {
			got = append(got, fmt.Sprintf("%d%s", *cu.State.CreditLeftMicros/1_000_000, map[bool]string{true: " blocked"}[cu.State.Blocked != ""]))
		}
	}
	// 2^23 micro-units is 8.39 USD, 2^22 4.19, 2^21 2.10, 2^20 1.05.
	if want := []string{"8", "4", "2", "1", "0 blocked"}; !slices.Equal(got, want) {
		t.Fatalf("states while spending 11 USD left, 1 USD a batch: %v; want %v", got, want)
	}
	if ch := spend(1); ch.Len() != 0 {
		t.Fatalf("spending on past 0: %+v; want no state", ch)
	}
}
