package ledger_test

import (
	"context"
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
	awayFromMidnight(t)
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
