package meter_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// bigStore makes an embedded store in dir whose usage stream holds n
// events of size bytes each, ids "big-0", "big-1"..., none acknowledged,
// and an empty dead-letter stream.
func bigStore(t *testing.T, dir string, n, size int) {
	t.Helper()
	e, js := startInProcess(t, dir, meter.SyncPolicy{}, nil)
	ctx := context.Background()
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := nats.NewMsg(meter.DefaultSubject)
		id := fmt.Sprintf("big-%d", i)
		m.Data = []byte(`{"id":"` + id + `","pad":"` + strings.Repeat("x", max(size-20-len(id), 0)) + `"}`)
		m.Header.Set(nats.MsgIdHdr, id)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	e.Shutdown()
	e.WaitForShutdown()
}

// handOverWithin runs HandOver of dir to nc, failing the test when it has
// not returned within d (the hang this guards against).
func handOverWithin(t *testing.T, d time.Duration, dir string, nc *nats.Conn) (meter.HandOverReport, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	began := time.Now()
	rep, err := meter.HandOver(ctx, dir, nc, time.Now(), nil)
	if ctx.Err() != nil {
		t.Fatalf("HandOver still going after %v (it returned %v when its context ended): it hangs", time.Since(began).Round(time.Millisecond), err)
	}
	return rep, err
}

// TestHandOverFailsAtOnceOnAPermanentRefusal: a hand-over whose messages
// the external NATS refuses for a reason that resending does not clear
// (an event larger than its max_payload, a usage stream whose limits
// refuse it, no stream for the events' subject) fails at once with an
// error naming the stream, the message and the cause, and leaves the store
// for the next attempt; instead of resending for ever while /readyz says
// "moving".
func TestHandOverFailsAtOnceOnAPermanentRefusal(t *testing.T) {
	usage := func(mod func(*jetstream.StreamConfig)) func(*testing.T, jetstream.JetStream) {
		return func(t *testing.T, js jetstream.JetStream) {
			ctx := context.Background()
			cfg := jetstream.StreamConfig{Name: meter.DefaultStreamName, Subjects: []string{meter.DefaultSubject}, Storage: jetstream.FileStorage}
			mod(&cfg)
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			if _, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name       string
		maxPayload int32
		streams    func(*testing.T, jetstream.JetStream)
		want       []string // in the error
	}{
		{"larger than max_payload", 4 << 10, usage(func(*jetstream.StreamConfig) {}),
			[]string{"maximum payload", "message 1 ", "big-0"}},
		{"larger than the stream's max_msg_size", 0, usage(func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1 << 10 }),
			[]string{"message size exceeds maximum", "message 1 ", "big-0"}},
		{"past the stream's max_msgs, discard new", 0, usage(func(c *jetstream.StreamConfig) { c.MaxMsgs, c.Discard = 2, jetstream.DiscardNew }),
			[]string{"maximum messages exceeded", "message 3 ", "big-2"}},
		{"past the stream's max_bytes, discard new", 0, usage(func(c *jetstream.StreamConfig) { c.MaxBytes, c.Discard = 20<<10, jetstream.DiscardNew }),
			[]string{"maximum bytes exceeded", "big-"}},
		{"no stream takes the subject", 0, usage(func(c *jetstream.StreamConfig) { c.Subjects = []string{"tollgate.usage.elsewhere"} }),
			[]string{"no stream", meter.DefaultSubject, "message 1 ", "big-0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "jetstream")
			bigStore(t, dir, 5, 8<<10)
			js := metertest.Connect(t, metertest.NewServerWith(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), MaxPayload: c.maxPayload}))
			c.streams(t, js)
			began := time.Now()
			_, err := handOverWithin(t, 20*time.Second, dir, js.Conn())
			if err == nil {
				t.Fatal("handed over")
			}
			t.Log(err)
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("failed after %v; want at once", took)
			}
			for _, w := range append(c.want, meter.DefaultStreamName) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if ok, _ := meter.HasEmbeddedStore(dir); !ok {
				t.Fatal("the store was moved")
			}
		})
	}
}

// TestHandOverAfterALimitIsRaisedLosesAndDoublesNothing: the events a
// failed attempt got stored before a stream's limit refused the next are
// dropped as duplicates by the next attempt, once the operator raised the
// limit: every event once.
func TestHandOverAfterALimitIsRaisedLosesAndDoublesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jetstream")
	bigStore(t, dir, 5, 100)
	js := metertest.Connect(t, metertest.NewServer(t))
	ctx := context.Background()
	cfg := jetstream.StreamConfig{Name: meter.DefaultStreamName, Subjects: []string{meter.DefaultSubject}, Storage: jetstream.FileStorage,
		MaxMsgs: 2, Discard: jetstream.DiscardNew, Duplicates: 10 * time.Minute}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := handOverWithin(t, 20*time.Second, dir, js.Conn()); err == nil {
		t.Fatal("handed over past max_msgs")
	}
	cfg.MaxMsgs = -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	rep, err := handOverWithin(t, 20*time.Second, dir, js.Conn())
	if err != nil {
		t.Fatal(err)
	}
	// The failed attempt had all 5 in flight (async publishes): 1 and 2
	// stored, 3 refused and the attempt over, but 4 and 5 may reach the
	// server after the test raised the limit, and be stored then (.ci/run:
	// 3 known). Whatever the split, each is stored once (below).
	if rep.Events != 5 || rep.EventsKnown < 2 || rep.EventsKnown > 4 {
		t.Fatalf("report %+v, want 5 events, the 2 stored by the failed attempt known (and those of 4 and 5 it had in flight)", rep)
	}
	s, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 5 {
		t.Fatalf("usage stream holds %d messages, want 5", n)
	}
}

// TestHandOverWithoutProgressGivesUp: a hand-over whose publishes are
// never acknowledged (a subscriber swallows the events' subject, as a
// stream without its leader leaves them unanswered) keeps resending only
// until no message was acknowledged for the no-progress bound, then fails
// with the last error, so that the caller's retry, its logging and /readyz
// take over.
func TestHandOverWithoutProgressGivesUp(t *testing.T) {
	defer meter.SetHandOverNoProgress(500 * time.Millisecond)()
	dir := filepath.Join(t.TempDir(), "jetstream")
	bigStore(t, dir, 3, 100)
	js := metertest.Connect(t, metertest.NewServer(t))
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: meter.DefaultStreamName, Subjects: []string{"tollgate.usage.elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	sub, err := js.Conn().Subscribe(meter.DefaultSubject, func(*nats.Msg) {}) // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	began := time.Now()
	_, err = handOverWithin(t, 20*time.Second, dir, js.Conn())
	took := time.Since(began)
	if err == nil {
		t.Fatal("handed over")
	}
	t.Log(err)
	if took > 5*time.Second {
		t.Errorf("gave up after %v; want soon after the 500ms bound", took)
	}
	for _, w := range []string{meter.DefaultStreamName, "no message acknowledged", "timeout"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if ok, _ := meter.HasEmbeddedStore(dir); !ok {
		t.Fatal("the store was moved")
	}
}

// TestFailedHandOversLeaveNoSubscriptionBehind: each HandOver publishes
// through a JetStream context of its own on the caller's connection, whose
// async publishes subscribe to a reply subject and watch the connection's
// status from a goroutine, both kept until the connection closes. The
// process's hand-over is tried again every minute while it fails (and
// the connection is the gateway's, open for the process's life): attempts
// that each left them behind grew its subscriptions and goroutines by one
// a minute, for as long as the failure lasted.
func TestFailedHandOversLeaveNoSubscriptionBehind(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jetstream")
	bigStore(t, dir, 2, 8<<10)
	js := metertest.Connect(t, metertest.NewServerWith(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), MaxPayload: 4 << 10}))
	ctx := context.Background()
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	nc := js.Conn()
	subs, goroutines := nc.NumSubscriptions(), runtime.NumGoroutine()
	const attempts = 10
	for range attempts {
		if _, err := handOverWithin(t, 20*time.Second, dir, nc); err == nil {
			t.Fatal("handed over past max_payload")
		}
	}
	if n := nc.NumSubscriptions(); n != subs {
		t.Errorf("the connection has %d subscriptions after %d failed hand-overs, %d before", n, attempts, subs)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() >= goroutines+attempts && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n >= goroutines+attempts {
		t.Errorf("%d goroutines after %d failed hand-overs, %d before", n, attempts, goroutines)
	}
}
