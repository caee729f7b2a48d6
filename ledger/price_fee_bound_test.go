package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestAFeeNoEventCanCostIsRefused: one event costs at most about 9.2
// million currency units (an int64 of 1e-12 units: usage.Rate), and a
// request_fee beyond that was taken, so that every event of the model
// overflowed and went to the dead-letter stream (a money review: an easy
// typo in VND or IDR). Such a fee, and a web_search price of which one
// unit overflows, are refused when the price is made, naming the field;
// the largest fee an event can carry is taken.
func TestAFeeNoEventCanCostIsRefused(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := ledger.PriceInput{Model: "m", Currency: "VND", Input: "1", Output: "2", EffectiveFrom: at}
	for _, tc := range []struct {
		field string
		set   func(*ledger.PriceInput)
	}{
		{"request_fee", func(p *ledger.PriceInput) { p.RequestFee = "9300000" }},
		{"web_search", func(p *ledger.PriceInput) { p.WebSearch = "10000000" }},
	} {
		in := base
		tc.set(&in)
		_, err := in.Price()
		if ledger.ErrorCode(err) != ledger.EInvalid || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s too large: Price() = %v; want invalid naming %s", tc.field, err, tc.field)
		}
	}
	in := base
	in.RequestFee, in.WebSearch = "9223372.036854", "9223372.036854"
	if _, err := in.Price(); err != nil {
		t.Errorf("the largest fee one event can carry: %v", err)
	}
}
