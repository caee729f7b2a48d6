package meter_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestRepublisherStopDrainsOnceMore: Stop is a gateway's last chance to
// send what its spools hold while NATS is connected: once the background
// rounds have stopped, it drains both spools once more, and so does Stop
// on a Republisher never started (a gateway stopping before its first
// round). Here no background round comes (an interval of an hour), so
// every record reaches its stream through Stop alone; a Stop that only
// stopped the rounds left them on disk until the next start, which a
// gateway being retired never has (a mutation audit: no test saw it).
func TestRepublisherStopDrainsOnceMore(t *testing.T) {
	for _, started := range []bool{true, false} {
		t.Run(fmt.Sprintf("started=%v", started), func(t *testing.T) {
			ctx := context.Background()
			js := metertest.NewStream(t)
			spool, dead := openSpool(t), openSpool(t)
			var ids []string
			for i := range 3 {
				e := testEvent(i + 1)
				if err := spool.Append(e); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, e.ID)
			}
			bad := testEvent(9)
			if err := dead.AppendRecord(mustJSON(map[string]any{"event_id": bad.ID, "reason": "refused by the test", "data": mustJSON(bad)})); err != nil {
				t.Fatal(err)
			}
			pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
			r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, func() bool { return true }, time.Hour, slog.Default())
			if started {
				r.Start()
			}
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := r.Stop(sctx); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if n, size, _ := spool.Stats(); n != 0 || size != 0 {
				t.Errorf("after Stop the usage spool holds %d events (%d bytes); want it drained", n, size)
			}
			if n, size, _ := dead.Stats(); n != 0 || size != 0 {
				t.Errorf("after Stop the dead-letter spool holds %d records (%d bytes); want it drained", n, size)
			}
			got := streamEvents(t, js, "TOLLGATE_USAGE", len(ids))
			for i := range ids {
				if got[i].ID != ids[i] {
					t.Errorf("usage stream event %d is %s, want %s (the spool's, in order)", i+1, got[i].ID, ids[i])
				}
			}
			dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
			if err != nil {
				t.Fatal(err)
			}
			letters, err := dlq.List(ctx, 0, 10)
			if err != nil || len(letters) != 1 || letters[0].EventID != bad.ID || letters[0].Reason != "refused by the test" {
				t.Errorf("dead letters %+v, %v; want the dead-letter spool's one, %s, with its reason", letters, err, bad.ID)
			}
		})
	}
}
