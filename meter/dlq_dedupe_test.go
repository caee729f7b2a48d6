package meter_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestDeadSpoolRedrainSetsAsideOnce: the dead-letter spool's
// drain saves its cursor every 256 records and at a segment's end; a kill
// -9 after records were sent to the dead-letter stream and before the
// cursor moved (simulated here by putting back the cursor the killed
// process had on disk) sends them again at the next start. The usage
// stream drops such resends (Nats-Msg-Id), and the dead-letter stream
// drops them too (a message id per spool record): each event is set aside
// once. (Found by a review: it was set aside again.)
func TestDeadSpoolRedrainSetsAsideOnce(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	dir := t.TempDir()
	deadDir := filepath.Join(dir, "spool-dead")
	spool, _ := meter.OpenSpool(filepath.Join(dir, "spool"), 0)
	dead, err := meter.OpenSpool(deadDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		e := testEvent(i)
		rec, _ := json.Marshal(map[string]any{"event_id": e.ID, "reason": "NATS refused the usage event", "data": mustJSON(e)})
		if err := dead.AppendRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	cursorBefore, _ := os.ReadFile(filepath.Join(deadDir, "cursor")) // none yet
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r.Start()
	waitFor(t, func() bool { n, _, _ := dead.Stats(); return n == 0 })
	_ = r.Stop(ctx)
	spool.Close()
	dead.Close()
	// kill -9 between the sends and the cursor's write.
	if cursorBefore == nil {
		os.Remove(filepath.Join(deadDir, "cursor"))
	} else {
		os.WriteFile(filepath.Join(deadDir, "cursor"), cursorBefore, 0o600)
	}
	spool2, _ := meter.OpenSpool(filepath.Join(dir, "spool"), 0)
	dead2, _ := meter.OpenSpool(deadDir, 0)
	r2 := meter.NewRepublisher(spool2, dead2, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r2.Start()
	waitFor(t, func() bool { n, _, _ := dead2.Stats(); return n == 0 })
	_ = r2.Stop(ctx)
	spool2.Close()
	dead2.Close()

	dlq, _ := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	letters, err := dlq.List(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, l := range letters {
		per[l.EventID]++
	}
	for id, n := range per {
		if n > 1 {
			t.Errorf("event %s is in the dead-letter stream %d times", id, n)
		}
	}
	// And each is there: the message id names the spool record, not its
	// reason alone, which the three records share.
	if len(per) != 3 {
		t.Errorf("%d of the 3 events set aside are in the dead-letter stream, want each once: %+v", len(per), letters)
	}
}
