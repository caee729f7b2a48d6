package meter_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnEventOverASmallMaxPayloadReachesTheDeadLetterStream: on a NATS
// server whose max_payload is below an event's size (8 KiB here; an event
// with its 16 metadata pairs is up to some 10 KiB, more with escapes),
// the gateway's publish is refused (nats.ErrMaxPayload, Permanent) and the
// event goes to the dead-letter spool, to be moved to the dead-letter
// stream. A dead letter was cut only past 512 KiB (NATS' default
// max_payload), so the move was refused for the same reason, every second,
// for good: the event reached neither the ledger nor `tollgate dlq list`,
// and everything behind it in the dead-letter spool waited with it.
func TestAnEventOverASmallMaxPayloadReachesTheDeadLetterStream(t *testing.T) {
	js := metertest.Connect(t, metertest.NewServerWith(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), MaxPayload: 8 << 10}))
	ctx := context.Background()
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}

	spool, dead := openSpool(t), openSpool(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	d := meter.NewDurablePublisher(pub, spool, dead, func() bool { return true }, 0, log, nil)

	big := testEvent(1)
	big.Metadata = map[string]string{}
	for i := range usage.MaxMetadataPairs {
		big.Metadata[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", usage.MaxMetadataValueLen)
	}
	small := testEvent(2)
	if err := d.Publish(ctx, big); err != nil {
		t.Fatalf("publish of an event over max_payload: %v (want it set aside, durable)", err)
	}
	if n, _, _ := dead.Stats(); n != 1 {
		t.Fatalf("dead-letter spool holds %d records, want the event over max_payload", n)
	}
	if err := d.Publish(ctx, small); err != nil {
		t.Fatal(err)
	}

	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, log)
	r.Start()
	defer r.Stop(ctx)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, _, _ := dead.Stats(); n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead-letter spool still holds the event over max_payload after 5 s: it never reaches the dead-letter stream")
		}
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	letters, err := dlq.List(ctx, 0, 10)
	if err != nil || len(letters) != 1 {
		t.Fatalf("dead letters = %+v, %v; want 1", letters, err)
	}
	if l := letters[0]; l.EventID != big.ID || !strings.Contains(l.Reason, "NATS refused") || len(l.Data) == 0 {
		t.Errorf("dead letter: event id %q, reason %q, %d bytes of data", l.EventID, l.Reason, len(l.Data))
	}
}
