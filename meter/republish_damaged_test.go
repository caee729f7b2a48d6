package meter_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRepublisherDrainsASpoolHoldingOnlyADamagedRecord: a spool (the
// usage spool, or the dead-letter spool) whose only record was damaged on
// disk holds no event, only bytes (Stats: 0 events, some bytes). The
// republisher must still drain it, setting the bytes aside for the
// dead-letter stream: a round that looked at the count of events alone
// left an acknowledged event's bytes on disk, never sent and never set
// aside (a mutant of round survived every other test).
func TestRepublisherDrainsASpoolHoldingOnlyADamagedRecord(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	open := func() *meter.Spool {
		dir, _ := damagedSpool(t, 1, func(b []byte, at []int) { b[len(b)-2] ^= 0x01 })
		s, err := meter.OpenSpool(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if n, size, _ := s.Stats(); n != 0 || size == 0 {
			t.Fatalf("Stats = %d events, %d bytes; want none and the damaged record's bytes", n, size)
		}
		return s
	}
	spool, dead := open(), open()
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r.Start()
	defer r.Stop(ctx)
	dlq, _ := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	var letters []usage.DeadLetter
	waitFor(t, func() bool { letters, _ = dlq.List(ctx, 0, 10); return len(letters) >= 2 })
	var reasons []string
	for _, l := range letters {
		reasons = append(reasons, l.Reason)
	}
	all := strings.Join(reasons, "\n")
	for _, which := range []string{"gateway's usage spool", "gateway's dead-letter spool"} {
		if !strings.Contains(all, which) {
			t.Errorf("no dead letter from the %s; reasons:\n%s", which, all)
		}
	}
}
