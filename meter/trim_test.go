package meter_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// holdingStore is a Store that refuses, as a transient failure, every
// batch holding the event held until release is closed, and records the
// ids of the events of every batch it has written.
type holdingStore struct {
	meter.Store

	mu       sync.Mutex
	held     string
	release  chan struct{}
	written  map[string]bool
	refusals int
}

func (s *holdingStore) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	s.mu.Lock()
	held, release := s.held, s.release
	s.mu.Unlock()
	select {
	case <-release:
	default:
		for _, e := range events {
			if e.ID == held {
				s.mu.Lock()
				s.refusals++
				s.mu.Unlock()
				return 0, errors.New("held by the test")
			}
		}
	}
	n, err := s.Store.WriteEvents(ctx, events)
	if err == nil {
		s.mu.Lock()
		for _, e := range events {
			s.written[e.ID] = true
		}
		s.mu.Unlock()
	}
	return n, err
}

func (s *holdingStore) state() (written, refusals int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.written), s.refusals
}

// eventually polls cond every 20 ms until it holds, failing the test after
// 20 s with what.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publishEvents publishes n events, each for a customer of its own, and
// returns their ids in publishing (stream) order.
func publishEvents(t *testing.T, ctx context.Context, pub *meter.Publisher, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: uuid.NewString(),
			KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
			Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
		ids[i] = e.ID
	}
	return ids
}

// TestWorkerTrimsBelowTheAckFloor: the usage stream has limits retention,
// and the workers remove from it exactly the events below the consumer's
// ack floor: an event not yet in the ledger stays in the stream, however
// many events after it are written (by the other write lane of one worker,
// or by another worker sharing the consumer, both trimming), and once it is
// written the stream empties.
func TestWorkerTrimsBelowTheAckFloor(t *testing.T) {
	t.Run("one worker", func(t *testing.T) { testTrimsBelowTheAckFloor(t, 1, 2000) })
	t.Run("two workers", func(t *testing.T) { testTrimsBelowTheAckFloor(t, 2, 500) })
}

// testTrimsBelowTheAckFloor runs TestWorkerTrimsBelowTheAckFloor with
// workers workers pulling at most batch events at once.
func testTrimsBelowTheAckFloor(t *testing.T, workers, batch int) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	stream, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	if r := stream.CachedInfo().Config.Retention; r != jetstream.LimitsPolicy {
		t.Fatalf("usage stream retention %v, want limits", r)
	}
	info := func() jetstream.StreamState {
		t.Helper()
		si, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return si.State
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	store := &holdingStore{Store: ledgertest.NewStore(t), release: make(chan struct{}), written: map[string]bool{}}
	close(store.release)
	// A pull waits up to 2 s to fill, so that a slow machine (or -race)
	// still pulls the backlog below whole: a part of fewer than splitAt
	// events is written whole, the held event's with the rest.
	cfg := meter.WorkerConfig{TrimEvery: 50 * time.Millisecond, BatchSize: batch, BatchWait: 2 * time.Second}

	// The first 300 events are written and trimmed.
	first := publishEvents(t, ctx, pub, 300)
	wctx, stop := context.WithCancel(ctx)
	done := metertest.StartWorker(t, wctx, js, store, cfg)
	eventually(t, "the stream trimmed after 300 events written", func() bool {
		s := info()
		return s.Msgs == 0 && s.FirstSeq == 301
	})
	if w, _ := store.state(); w != len(first) {
		t.Fatalf("%d events written, want %d", w, len(first))
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The next events wait in the stream for fresh workers. One worker's
	// first pull takes 2,000 and splits them between its two write lanes
	// by customer; two workers share 3,000, 500 at a time. The part
	// holding the first of them (stream sequence 301) fails until
	// released; the other lane's, or the other worker's, events are
	// written. (A worker whose write is stuck holds up to four batches:
	// the one it writes, and one at each hand-over of its pipeline. With
	// 2,000 events the worker that pulled first could hold them all before
	// the other's first pull, on a busy machine.)
	n := 2000
	if workers > 1 {
		n = 3000
	}
	next := publishEvents(t, ctx, pub, n)
	store.mu.Lock()
	store.held, store.release = next[0], make(chan struct{})
	store.mu.Unlock()
	wctx, stop = context.WithCancel(ctx)
	defer stop()
	dones := make([]<-chan error, workers)
	for i := range dones {
		dones[i] = metertest.StartWorker(t, wctx, js, store, cfg)
	}
	eventually(t, "the other lane written, the held one refused three times", func() bool {
		w, r := store.state()
		return w > len(first) && r >= 3
	})
	time.Sleep(5 * cfg.TrimEvery) // time for trims, were the worker to trim past the floor
	s := info()
	if s.FirstSeq != 301 || s.Msgs != uint64(n) {
		t.Fatalf("stream first sequence %d with %d events while sequence 301 is not written; want 301 and %d", s.FirstSeq, s.Msgs, n)
	}
	if m, err := stream.GetMsg(ctx, 301); err != nil || m.Header.Get("Nats-Msg-Id") != next[0] {
		t.Fatalf("sequence 301: %v, %v; want the held event %s", m, err, next[0])
	}

	close(store.release)
	eventually(t, "every event written and the stream empty", func() bool {
		w, _ := store.state()
		s := info()
		return w == len(first)+len(next) && s.Msgs == 0 && s.FirstSeq == uint64(301+n)
	})
	stop()
	for _, done := range dones {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWorkQueueStreamKept: a usage stream made with work-queue retention
// (by versions before limits retention) cannot be changed to limits
// (JetStream refuses): EnsureStream keeps it as it is, and the worker
// writes its events, which JetStream removes as they are acknowledged.
func TestWorkQueueStreamKept(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.Connect(t, metertest.NewServer(t))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: meter.DefaultStreamName,
		Subjects: []string{meter.DefaultSubject}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	stream, err := meter.EnsureStream(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatalf("EnsureStream on a work-queue stream: %v", err)
	}
	si, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.Config.Retention != jetstream.WorkQueuePolicy || si.Config.Duplicates != meter.DefaultDuplicateWindow {
		t.Fatalf("retention %v, duplicate window %v: want work-queue kept and the rest updated", si.Config.Retention, si.Config.Duplicates)
	}
	drainToEmpty(t, js, stream, 100)
}

// TestWorkerStopsWhenItsConsumerIsDeleted: Run returns, with an error, once
// its consumer is gone, trim and all, so that the service can make it anew.
func TestWorkerStopsWhenItsConsumerIsDeleted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.NewStream(t)
	done := metertest.StartWorker(t, ctx, js, ledgertest.NewStore(t), meter.WorkerConfig{TrimEvery: 20 * time.Millisecond})
	time.Sleep(200 * time.Millisecond)
	if err := js.DeleteConsumer(ctx, meter.DefaultStreamName, "tollgate-meter"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil after its consumer was deleted; want the error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run has not returned 10 s after its consumer was deleted")
	}
}

// TestServerVersionDecidesRetention runs the meter on the NATS server
// installed on the machine (nats-server on PATH, else /usr/sbin/nats-server;
// TOLLGATE_NATS_SERVER names another), started on a port and store of its
// own; without one it skips, and under CI it fails (.ci/run installs
// Debian's). On a server older than 2.9.15, where a purge can make a consumer's
// ack floor pass events not written (see minTrimServer), the usage stream
// is made work-queue as before; on a newer one it has limits retention and
// the worker trims it. Either way every event reaches the ledger and the
// stream empties.
func TestServerVersionDecidesRetention(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bin := os.Getenv("TOLLGATE_NATS_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats-server"); err != nil {
			bin = "/usr/sbin/nats-server"
		}
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("nats-server is not installed (apt-get install nats-server, or set TOLLGATE_NATS_SERVER): %v", err)
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := exec.Command(bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", t.TempDir())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	var nc *nats.Conn
	eventually(t, "the nats-server started answers", func() bool {
		nc, err = nats.Connect("nats://127.0.0.1:" + port)
		return err == nil
	})
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := meter.EnsureStream(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	version := nc.ConnectedServerVersion()
	want := jetstream.WorkQueuePolicy
	if meter.Trimmable(version) {
		want = jetstream.LimitsPolicy
	}
	if got := stream.CachedInfo().Config.Retention; got != want {
		t.Fatalf("nats-server %s: usage stream retention %v, want %v", version, got, want)
	}
	t.Logf("nats-server %s: retention %v", version, want)
	drainToEmpty(t, js, stream, 200)
}

// drainToEmpty runs a worker (trimming every 50 ms) on js, publishes n
// events, and waits until all are in the ledger and the stream holds none
// (removed by JetStream on a work-queue stream, trimmed otherwise); then
// stops the worker.
func drainToEmpty(t *testing.T, js jetstream.JetStream, stream jetstream.Stream, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := &holdingStore{Store: ledgertest.NewStore(t), release: make(chan struct{}), written: map[string]bool{}}
	close(store.release)
	done := metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{TrimEvery: 50 * time.Millisecond})
	publishEvents(t, ctx, meter.NewPublisher(js, meter.StreamConfig{}, 0), n)
	eventually(t, "every event written and the stream empty", func() bool {
		w, _ := store.state()
		si, err := stream.Info(ctx)
		return err == nil && w == n && si.State.Msgs == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
