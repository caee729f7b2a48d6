package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestReconcileListsTheMostUnpricedModels: a reconciliation lists at most
// ledger.MaxListed unpriced models, those of the most events first, and
// counts them all. It listed every model: a client chooses model names
// (prefix routes), and each unpriced one was a row of the answer, built
// in memory, for the admin API, the CLI and the console alike.
func TestReconcileListsTheMostUnpricedModels(t *testing.T) {
	t.Parallel()
	s, c, k := setup(t)
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	u := usage.Tokens{PromptTokens: 10, CompletionTokens: 5}
	const models = ledger.MaxListed + 5
	events := make([]usage.Event, 0, models+2)
	for i := range models {
		events = append(events, newEvent(c.ID, k.ID, fmt.Sprintf("chosen-%04d", i), at, u))
	}
	events = append(events, newEvent(c.ID, k.ID, "chosen-0999", at, u), newEvent(c.ID, k.ID, "chosen-0999", at, u))
	if n, err := s.WriteEvents(ctx, events); err != nil || n != len(events) {
		t.Fatalf("WriteEvents = %d, %v; want %d", n, err, len(events))
	}
	rec, err := s.Reconcile(ctx, at, at.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Unpriced) != ledger.MaxListed || rec.UnpricedModels != models || rec.UnpricedEvents != int64(len(events)) {
		t.Fatalf("reconciliation lists %d unpriced models, counts %d and %d events; want %d listed of %d, %d events",
			len(rec.Unpriced), rec.UnpricedModels, rec.UnpricedEvents, ledger.MaxListed, models, len(events))
	}
	if first := rec.Unpriced[0]; first.Model != "chosen-0999" || first.Events != 3 {
		t.Errorf("first unpriced model listed = %+v, want chosen-0999 with 3 events (the most)", first)
	}
	if second := rec.Unpriced[1]; second.Model != "chosen-0000" {
		t.Errorf("second unpriced model listed = %+v, want chosen-0000 (then by name)", second)
	}
}
