package ledger_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestReconcileWidensItsRangeToWholeHours: the rollups are hourly, so a
// range that ends inside an hour is checked to that hour's end (as
// Reconciliation.To says), and the events of its last, partial hour are
// checked, not left out.
func TestReconcileWidensItsRangeToWholeHours(t *testing.T) {
	b := newBilling(t, nil)
	b.price("m", "USD", "1", "0", "")
	b.write(b.event("m", jan.Add(10*time.Hour+30*time.Minute), usage.Tokens{PromptTokens: 1000}))
	rec, err := b.s.Reconcile(b.ctx, jan.Add(9*time.Hour+15*time.Minute), jan.Add(10*time.Hour+45*time.Minute))
	if err != nil || !rec.From.Equal(jan.Add(9*time.Hour)) || !rec.To.Equal(jan.Add(11*time.Hour)) || rec.Events != 1 || !rec.Clean {
		t.Fatalf("Reconcile = %+v, %v; want [09:00, 11:00) with its one event, clean", rec, err)
	}
}
