package meter_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestDurablePublisherSpoolsAtOnceWithoutStream: while the usage stream
// did not exist (deleted, or not created yet), NATS answered each publish
// "no responders", which nats.go retried twice 250 ms apart: every
// request's end waited about 505 ms before its event went to the spool.
// It goes to the spool at once now, and the Republisher sends the spooled
// events on, in order, once the stream exists: none is lost or set aside.
func TestDurablePublisherSpoolsAtOnceWithoutStream(t *testing.T) {
	ctx := context.Background()
	js := metertest.Connect(t, metertest.NewServer(t)) // no usage stream
	spool, dead := openSpool(t), openSpool(t)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	d := meter.NewDurablePublisher(pub, spool, dead, func() bool { return true }, 0, slog.New(slog.DiscardHandler), nil)

	const n = 5
	var events []*usage.Event
	var took []time.Duration
	for i := range n {
		e := testEvent(i)
		start := time.Now()
		if err := d.Publish(ctx, e); err != nil {
			t.Fatalf("Publish with the stream missing: %v", err)
		}
		took = append(took, time.Since(start))
		events = append(events, e)
	}
	t.Logf("publish with the usage stream missing (to the spool): %v", took)
	// The retries alone took 500 ms; a publish and a spool group commit
	// take milliseconds, a loaded CI machine's fsync more.
	if slow := slices.Max(took); slow >= 250*time.Millisecond {
		t.Errorf("a publish with the usage stream missing took %s (all: %v); want the spool at once", slow, took)
	}
	if got, _, _ := spool.Stats(); got != n {
		t.Fatalf("spool holds %d events, want %d", got, n)
	}
	if got, _, _ := dead.Stats(); got != 0 {
		t.Fatalf("dead-letter spool holds %d, want 0: a missing stream is not a refusal", got)
	}

	// The republisher waits while the stream is missing, then drains.
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, func() bool { return true },
		20*time.Millisecond, slog.New(slog.DiscardHandler))
	r.Start()
	defer r.Stop(ctx)
	time.Sleep(200 * time.Millisecond) // rounds that find no stream
	if got, _, _ := spool.Stats(); got != n {
		t.Fatalf("with the stream still missing the spool holds %d events, want %d", got, n)
	}
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { got, _, _ := spool.Stats(); return got == 0 })
	got := streamEvents(t, js, meter.DefaultStreamName, n)
	for i, e := range got {
		if e.ID != events[i].ID {
			t.Errorf("usage stream's event %d is %s, want %s", i+1, e.ID, events[i].ID)
		}
	}
	if got, _, _ := dead.Stats(); got != 0 {
		t.Errorf("dead-letter spool holds %d after the drain, want 0", got)
	}
}

// BenchmarkPublishStreamMissing measures one Publisher.Publish while no
// stream takes the usage subject: the time before the caller may spool
// the event (about 505 ms per publish before nats.go's retries were
// turned off; a round trip to NATS after).
func BenchmarkPublishStreamMissing(b *testing.B) {
	ctx := context.Background()
	js := metertest.Connect(b, metertest.NewServer(b))
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	e := testEvent(1)
	for b.Loop() {
		if err := pub.Publish(ctx, e); !errors.Is(err, jetstream.ErrNoStreamResponse) {
			b.Fatalf("publish with no stream: %v, want %v", err, jetstream.ErrNoStreamResponse)
		}
	}
}
