package gateway

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestChargeOfIsWhatTheLedgerCharges: a spend hold ends with the charge
// of the request's last attempt (spendHold.end), which counts against
// its key's daily and monthly limits until the meter's next key state.
// That charge is the ledger's: the event's rating when it was committed,
// and nothing when it was not charged. An answer withheld because its
// event was not durable (commitAnswer) is committed and not charged; a
// mutant that ignored NotCharged passed every test and counted such
// withheld answers against their key, refusing the customer spend the
// ledger never billed.
func TestChargeOfIsWhatTheLedgerCharges(t *testing.T) {
	s := &Server{rates: oneRate{Currency: "USD", InputMicros: 1_000_000, OutputMicros: 2_000_000, EffectiveFrom: time.Unix(0, 0)}}
	charged := func(edit func(x *exchange)) int64 {
		x := &exchange{s: s, committed: true, event: &usage.Event{Model: "m", Time: time.Now(),
			Usage: usage.Tokens{PromptTokens: 1000, CompletionTokens: 500}}}
		edit(x)
		return s.chargeOf(x)
	}
	// 1,000 tokens at $1 per 1M and 500 at $2 per 1M: $0.002, in nano-units.
	if got := charged(func(*exchange) {}); got != 2_000_000 {
		t.Errorf("a committed answer: %d nano-units, want 2000000", got)
	}
	if got := charged(func(x *exchange) { x.event.NotCharged = true }); got != 0 {
		t.Errorf("a committed event not charged (an answer withheld): %d nano-units, want 0", got)
	}
	if got := charged(func(x *exchange) { x.committed = false }); got != 0 {
		t.Errorf("an event not committed: %d nano-units, want 0", got)
	}
}
