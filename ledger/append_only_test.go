package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestEveryLedgerTableIsAppendOnly: "nothing on the ledger is updated or
// deleted; corrections and refunds are new entries" (DESIGN.md, invariant
// 5). TestLedgerIsAppendOnly tries the usage events; the entries (credits,
// adjustments, refunds, rerates), the price book, the customers' overrides
// and the attempts not charged are the ledger too, and their triggers
// refuse UPDATE and DELETE alike.
func TestEveryLedgerTableIsAppendOnly(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: "m", DiscountPercent: "10", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEntry(ctx, c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "10", Memo: "top-up"}); err != nil {
		t.Fatal(err)
	}
	attempt := newEvent(c.ID, k.ID, "m", time.Now(), usage.Tokens{PromptTokens: 5})
	attempt.NotCharged, attempt.Attempt, attempt.RequestID = true, 1, uuid.NewString()
	attempt.Status, attempt.HTTPStatus = usage.StatusUpstreamError, 502
	if _, err := s.WriteEvents(ctx, []usage.Event{attempt}); err != nil {
		t.Fatal(err)
	}
	for table, set := range map[string]string{
		"ledger_entries":  "memo = 'changed'",
		"prices":          "input_micros = 0",
		"price_overrides": "discount_bp = 0",
		"usage_attempts":  "prompt_tokens = 0",
	} {
		if n, err := s.QueryInt64ForTest(ctx, "SELECT count(*) FROM "+table); err != nil || n == 0 {
			t.Fatalf("%s holds %d rows (%v): the test wrote none", table, n, err)
		}
		for _, stmt := range []string{"UPDATE " + table + " SET " + set, "DELETE FROM " + table} {
			if err := s.ExecForTest(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("%s: %v; want it refused, the ledger being append-only", stmt, err)
			}
		}
	}
}
