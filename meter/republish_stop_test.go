package meter_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
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

// TestRepublisherSetsAsideWhatItCannotRead: a record of the usage spool
// that decodes but is no valid event (a gateway bug: a malformed key id)
// goes to the dead-letter stream under its event's id, as a record that
// is no valid event, not as one NATS refused (whose cure is elsewhere); a
// record of the dead-letter spool that is not JSON goes there with its
// bytes, not dropped; and the letter of a dead-letter spool record holds
// the event it carries, not the spool's record around it, so that it can
// be replayed. The usage events around them reach the usage stream.
func TestRepublisherSetsAsideWhatItCannotRead(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	spool, dead := openSpool(t), openSpool(t)
	before, invalid, after := testEvent(1), testEvent(2), testEvent(3)
	invalid.KeyID = "not-a-uuid"
	for _, rec := range [][]byte{mustJSON(before), mustJSON(invalid), mustJSON(after)} {
		if err := spool.AppendRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	refused := testEvent(4)
	refusedJSON := mustJSON(refused)
	for _, rec := range [][]byte{
		mustJSON(map[string]any{"event_id": refused.ID, "reason": "refused by the test", "data": refusedJSON}),
		[]byte("{not json"),
	} {
		if err := dead.AppendRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r.Start()
	defer r.Stop(ctx)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var letters []usage.DeadLetter
	waitFor(t, func() bool {
		n, _, _ := spool.Stats()
		m, _, _ := dead.Stats()
		letters, _ = dlq.List(ctx, 0, 10)
		return n+m == 0 && len(letters) >= 3
	})
	got := streamEvents(t, js, "TOLLGATE_USAGE", 2)
	if got[0].ID != before.ID || got[1].ID != after.ID {
		t.Errorf("usage stream holds %s, %s; want the valid events around the invalid one, %s and %s", got[0].ID, got[1].ID, before.ID, after.ID)
	}
	if len(letters) != 3 {
		t.Fatalf("%d dead letters, want 3: %+v", len(letters), letters)
	}
	var sawInvalid, sawUnreadable, sawRefused bool
	for _, l := range letters {
		switch {
		case l.EventID == invalid.ID:
			sawInvalid = true
			if !strings.HasPrefix(l.Reason, "a spooled record is not a valid usage event") || !strings.Contains(l.Reason, "key_id") {
				t.Errorf("the invalid event's dead letter has the reason %q; want it said to be no valid usage event, and why", l.Reason)
			}
		case l.Data == "{not json":
			sawUnreadable = true
			if l.EventID != "" || !strings.Contains(l.Reason, "unreadable record of the dead-letter spool") {
				t.Errorf("the unreadable record's dead letter: event id %q, reason %q", l.EventID, l.Reason)
			}
		case l.EventID == refused.ID:
			sawRefused = true
			if l.Reason != "refused by the test" || l.Data != string(refusedJSON) {
				t.Errorf("the dead-letter spool's record became the letter %q / %q; want its reason, and its event as it was: %s", l.Reason, l.Data, refusedJSON)
			}
		default:
			t.Errorf("unexpected dead letter %+v", l)
		}
	}
	if !sawInvalid || !sawUnreadable || !sawRefused {
		t.Errorf("dead letters %+v: the invalid event's %v, the unreadable record's %v, the dead-letter spool's event's %v; want all three",
			letters, sawInvalid, sawUnreadable, sawRefused)
	}
}
