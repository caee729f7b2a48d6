package meter_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRepublisherDeadLettersWhatNATSRefuses: spooled records do not jam
// the spool. An event of an older gateway, too large for NATS, is
// normalized and published; one the stream refuses (over its maximum
// message size) and a record that is no event go to the dead-letter
// stream with their reasons; the events behind them reach the usage
// stream, in order.
func TestRepublisherDeadLettersWhatNATSRefuses(t *testing.T) {
	ctx := context.Background()
	js := metertest.Connect(t, metertest.NewServer(t))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TOLLGATE_USAGE", Subjects: []string{"tollgate.usage.v1"},
		MaxMsgSize: 1000, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	spool, dead := openSpool(t), openSpool(t)
	huge := testEvent(1)
	huge.Model = "sim/" + strings.Repeat("x", 3<<19) // 1.5 MiB: over NATS' max_payload
	refused := testEvent(2)
	refused.Error = strings.Repeat("e", 900) // within an event's limits, over the stream's
	before, after := testEvent(3), testEvent(4)
	for _, rec := range [][]byte{mustJSON(before), mustJSON(huge), mustJSON(refused), []byte("not an event"), mustJSON(after)} {
		if err := spool.AppendRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r.Start()
	defer r.Stop(ctx)
	waitFor(t, func() bool { n, _, _ := spool.Stats(); return n == 0 })

	got := streamEvents(t, js, "TOLLGATE_USAGE", 3)
	if got[0].ID != before.ID || got[1].ID != huge.ID || got[2].ID != after.ID {
		t.Fatalf("usage stream holds %s, %s, %s; want %s, %s, %s", got[0].ID, got[1].ID, got[2].ID, before.ID, huge.ID, after.ID)
	}
	if len(got[1].Model) > usage.MaxModelLen || got[1].Corrections != "model_truncated" {
		t.Errorf("the huge event was published with a model of %d bytes, corrections %q", len(got[1].Model), got[1].Corrections)
	}
	dlq, _ := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	letters, err := dlq.List(ctx, 0, 10)
	if err != nil || len(letters) != 2 {
		t.Fatalf("dead letters = %+v, %v; want 2", letters, err)
	}
	if letters[0].EventID != refused.ID || !strings.Contains(letters[0].Reason, "NATS refused") || len(letters[0].Data) == 0 {
		t.Errorf("first dead letter = %s / %q", letters[0].EventID, letters[0].Reason)
	}
	if letters[1].Data != "not an event" || !strings.Contains(letters[1].Reason, "not a valid usage event") {
		t.Errorf("second dead letter = %q / %q", letters[1].Data, letters[1].Reason)
	}
}

// TestRepublisherDeadLettersACorruptSpoolRecord: a record damaged on disk
// in the middle of the spool (a flipped byte: its event's JSON nearly
// whole) was skipped with a plain-text warning alone, so an event whose
// client had its usage and [DONE] left no trace but that line (found by
// review). Its bytes now go to the dead-letter stream, with a reason
// saying where they were; the records around it reach the usage stream.
func TestRepublisherDeadLettersACorruptSpoolRecord(t *testing.T) {
	ctx := context.Background()
	js := metertest.Connect(t, metertest.NewServer(t))
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	dir, events := damagedSpool(t, 3, func(b []byte, at []int) {
		b[at[1]+8+(at[2]-at[1]-8)/4] ^= 0x01 // one bit of the second record's JSON
	})
	spool, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spool.Close() })

	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	r := meter.NewRepublisher(spool, openSpool(t), pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r.Start()
	defer r.Stop(ctx)
	waitFor(t, func() bool { n, _, _ := spool.Stats(); return n == 0 })
	got := streamEvents(t, js, "TOLLGATE_USAGE", 2)
	if got[0].ID != events[0].ID || got[1].ID != events[2].ID {
		t.Errorf("usage stream holds %s, %s; want the records around the damaged one", got[0].ID, got[1].ID)
	}
	dlq, _ := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	var letters []usage.DeadLetter
	waitFor(t, func() bool { letters, _ = dlq.List(ctx, 0, 10); return len(letters) > 0 })
	if len(letters) != 1 || !strings.Contains(letters[0].Reason, "corrupt record of the gateway's usage spool") ||
		!strings.Contains(letters[0].Data, events[1].ID) {
		t.Errorf("dead letters = %+v; want one: the damaged record's bytes, holding its event's id, and where they were", letters)
	}
}

// TestDurablePublisherNeverOnlyLogs: an event the publisher cannot accept
// (a gateway bug made its key id malformed) is set aside durably and
// reaches the dead-letter stream, even when NATS was down when it came.
func TestDurablePublisherNeverOnlyLogs(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	spool, dead := openSpool(t), openSpool(t)
	var up atomic.Bool // NATS "down" at first
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	d := meter.NewDurablePublisher(pub, spool, dead, up.Load, 0, slog.Default(), nil)
	bad := testEvent(1)
	bad.KeyID = "not-a-uuid"
	fixable := testEvent(2)
	fixable.Usage = usage.Tokens{PromptTokens: -5, CompletionTokens: 7, ReasoningTokens: 3}
	for _, e := range []*usage.Event{bad, fixable} {
		if err := d.Publish(ctx, e); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	if n, _, _ := dead.Stats(); n != 1 {
		t.Fatalf("dead-letter spool holds %d, want 1", n)
	}
	if n, _, _ := spool.Stats(); n != 1 {
		t.Fatalf("spool holds %d, want 1 (the corrected event)", n)
	}
	up.Store(true)
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, up.Load, 20*time.Millisecond, slog.Default())
	r.Start()
	waitFor(t, func() bool { n, _, _ := dead.Stats(); m, _, _ := spool.Stats(); return n+m == 0 })
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	got := streamEvents(t, js, "TOLLGATE_USAGE", 1)
	if got[0].ID != fixable.ID || got[0].Usage.PromptTokens != 0 || got[0].Corrections != usage.CorrectionNegative {
		t.Fatalf("published %+v, want the event corrected", got[0])
	}
	dlq, _ := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	letters, _ := dlq.List(ctx, 0, 10)
	if len(letters) != 1 || letters[0].EventID != bad.ID || !strings.Contains(letters[0].Reason, "key_id") {
		t.Fatalf("dead letters = %+v", letters)
	}
}

// TestSpoolHasOneDrainer: drains started at once (the republisher's round
// and a shutdown's last drain) send each record once.
func TestSpoolHasOneDrainer(t *testing.T) {
	s := openSpool(t)
	for i := range 300 {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, err := s.Drain(context.Background(), func(_ context.Context, data []byte) error {
				e, _ := usage.Decode(data)
				time.Sleep(10 * time.Microsecond)
				mu.Lock()
				seen[e.ID]++
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s sent %d times", id, n)
		}
	}
	if len(seen) != 300 {
		t.Fatalf("%d sent, want 300", len(seen))
	}
}

func openSpool(t *testing.T) *meter.Spool {
	t.Helper()
	s, err := meter.OpenSpool(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}

// streamEvents reads the first n events of a stream.
func streamEvents(t *testing.T, js jetstream.JetStream, stream string, n int) []usage.Event {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []usage.Event
	for seq := uint64(1); len(out) < n; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		e, err := usage.Decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// TestPublishBehindSpoolKeepsTheRealEventFirst: after a crash, a request's
// real event may sit in the spool (NATS was down when it ended) while the
// crash journal makes an estimate of the same id. The estimate, published
// behind the spool, reaches the stream after the real event, which the
// stream then keeps (it drops a later message of the same id).
func TestPublishBehindSpoolKeepsTheRealEventFirst(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	spool, dead := openSpool(t), openSpool(t)
	real := testEvent(1)
	real.Usage = usage.Tokens{PromptTokens: 100, CompletionTokens: 900}
	if err := spool.Append(real); err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	connected := func() bool { return true }
	d := meter.NewDurablePublisher(pub, spool, dead, connected, 0, slog.Default(), nil)
	estimate := testEvent(1)
	estimate.ID = real.ID
	estimate.Status, estimate.UsageSource = usage.StatusCrashed, usage.SourceEstimated
	estimate.Usage = usage.Tokens{PromptTokens: 90, CompletionTokens: 400}
	other := testEvent(2) // a crashed request with no spooled event
	for _, e := range []*usage.Event{estimate, other} {
		if err := d.PublishBehindSpool(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, _ := spool.Stats(); n != 3 {
		t.Fatalf("spool holds %d events, want 3: the estimates behind the real event", n)
	}
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, connected, 20*time.Millisecond, slog.Default())
	r.Start()
	defer r.Stop(ctx)
	waitFor(t, func() bool { n, _, _ := spool.Stats(); return n == 0 })
	got := streamEvents(t, js, "TOLLGATE_USAGE", 2)
	if got[0].ID != real.ID || got[0].Usage != real.Usage || got[1].ID != other.ID {
		t.Fatalf("stream holds %s %+v then %s; want the real event of %s, then %s", got[0].ID, got[0].Usage, got[1].ID, real.ID, other.ID)
	}
	// With the spool empty, it publishes at once.
	last := testEvent(3)
	if err := d.PublishBehindSpool(ctx, last); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := spool.Stats(); n != 0 {
		t.Fatalf("spool holds %d with nothing before: want the event published at once", n)
	}
}

// TestSpoolCapRefusesRequestsNotTheirEvents (a crash review): the spool's
// cap refused an event whose record would pass it, while Accepting still
// admitted requests (the spool a record short of its cap): every request
// then served had its event refused, kept in the crash journal alone until
// the next start; and a start whose recovered events met a full spool
// failed, with NATS down at every try. The cap now refuses requests
// (Accepting), never the event of one admitted or recovered, and every
// event reaches the stream once NATS is back.
func TestSpoolCapRefusesRequestsNotTheirEvents(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	spool, err := meter.OpenSpool(t.TempDir(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer spool.Close()
	dead := openSpool(t)
	var up atomic.Bool // NATS down
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	d := meter.NewDurablePublisher(pub, spool, dead, up.Load, 0, slog.Default(), nil)
	published := 0
	for ; d.Accepting() == nil; published++ {
		if published > 1000 {
			t.Fatal("Accepting never refused: the cap is 4 KiB")
		}
		if err := d.Publish(ctx, testEvent(published)); err != nil {
			t.Fatalf("event %d, of a request admitted: %v", published, err)
		}
	}
	if err := d.Accepting(); !errors.Is(err, meter.ErrSpoolFull) {
		t.Fatalf("Accepting = %v, want ErrSpoolFull", err)
	}
	// The requests in flight when the cap was reached, and a crash's.
	for range 3 {
		if err := d.Publish(ctx, testEvent(published)); err != nil {
			t.Fatalf("an in-flight request's event past the cap: %v", err)
		}
		published++
		if err := d.PublishBehindSpool(ctx, testEvent(published)); err != nil {
			t.Fatalf("a recovered event past the cap: %v", err)
		}
		published++
	}
	if n, _, _ := spool.Stats(); n != int64(published) {
		t.Fatalf("spool holds %d events, want all %d", n, published)
	}
	up.Store(true)
	r := meter.NewRepublisher(spool, dead, pub, js, meter.StreamConfig{}, up.Load, 20*time.Millisecond, slog.Default())
	r.Start()
	defer r.Stop(ctx)
	waitFor(t, func() bool { n, _, _ := spool.Stats(); return n == 0 })
	streamEvents(t, js, "TOLLGATE_USAGE", published)
	if err := d.Accepting(); err != nil {
		t.Fatalf("drained: Accepting = %v", err)
	}
}
