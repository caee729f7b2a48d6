package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRerateOfAnEventItCannotRateIsAConflict: an unpriced event is stored
// at cost 0 whatever its counts (a billion prompt tokens, the most an
// event holds), and a price added later can rate it beyond int64 (here
// 10,000 per million tokens: 1e19 e12 units, about 0.6 USD per million
// tokens in IDR). Re-rating then stopped with an internal error (500, "see
// the server log"); it is a conflict naming the event and the cause, and
// nothing of its batch is written or counted. (Found by review.)
func TestRerateOfAnEventItCannotRateIsAConflict(t *testing.T) {
	b := newBilling(t, nil)
	huge := b.event("m", jan.Add(2*time.Minute), usage.Tokens{PromptTokens: 1_000_000_000}) // in the first's batch
	b.write(b.event("m", jan.Add(time.Minute), usage.Tokens{PromptTokens: 1000}), huge)
	b.price("m", "IDR", "10000", "0", "")
	res, err := b.s.Rerate(b.ctx, jan, feb, nil)
	if ledger.ErrorCode(err) != ledger.EConflict || !strings.Contains(err.Error(), huge.ID) || !strings.Contains(err.Error(), "overflows") ||
		res != (ledger.RerateResult{}) {
		t.Fatalf("Rerate = %+v, %v; want a conflict naming event %s and its overflow, and nothing counted", res, err, huge.ID)
	}
	if bal, err := b.s.Balance(b.ctx, b.c.ID); err != nil || bal.Charges != "0" {
		t.Fatalf("balance after the refused re-rating = %+v, %v; want nothing charged", bal, err)
	}
}
