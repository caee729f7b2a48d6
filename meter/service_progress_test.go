package meter_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// deleteConsumerWhileRunning deletes the meter's durable consumer as soon
// as it exists, again and again (every 5 ms), until the returned stop is
// called: each worker the service sets up fails as soon as it runs. deleted
// says how many consumers it has deleted so far.
func deleteConsumerWhileRunning(js jetstream.JetStream) (deleted func() int64, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var n atomic.Int64
	wg.Go(func() {
		for ctx.Err() == nil {
			if js.DeleteConsumer(ctx, meter.DefaultStreamName, "tollgate-meter") == nil {
				n.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	return n.Load, func() { cancel(); wg.Wait() }
}

// TestServiceStatusHoldsThroughFastFailures: the service cleared its
// status as soon as NewWorker succeeded, before Run had consumed anything,
// so a Run that kept failing at once (its consumer deleted as soon as it
// was made) made /readyz flap between ready and degraded, and "since"
// start again at each failure. The status clears only once a worker makes
// progress, and keeps the first failure's time until then.
func TestServiceStatusHoldsThroughFastFailures(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	js := metertest.NewStream(t)
	logs := &metertest.LockedBuffer{}
	svc := meter.NewService(js, ledgertest.NewStore(t), meter.WorkerConfig{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	deleted, stopDeleting := deleteConsumerWhileRunning(js)
	defer stopDeleting()
	svc.Start()
	defer stopService(t, svc)

	first := waitStatus(t, svc, "failed", func(st meter.ServiceStatus) bool { return st.Err != nil })
	// Attempts at 0.5, 1.5 and 3.5 s after the first failure, each failing
	// at once: the status must hold, with its time, throughout.
	var cleared int
	var moved []time.Time
	before := deleted()
	for end := time.Now().Add(3700 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		switch st := svc.Status(); {
		case st.Err == nil:
			cleared++
		case !st.Since.Equal(first.Since):
			if len(moved) == 0 || !moved[len(moved)-1].Equal(st.Since) {
				moved = append(moved, st.Since)
			}
		}
	}
	if n := deleted() - before; n < 2 { // 3, unless setting up is slow (-race)
		t.Fatalf("%d consumers set up and deleted in 3.7 s, want 3", n)
	}
	if cleared > 0 || len(moved) > 0 {
		t.Errorf("while every Run failed at once the status was clear in %d samples, and its time moved from %s to %v",
			cleared, first.Since.Format(time.StampMicro), moved)
	}
	if out := logs.String(); strings.Contains(out, "meter worker running") {
		t.Errorf("runs that failed at once are logged as running:\n%s", out)
	}

	stopDeleting()
	waitStatus(t, svc, "running", func(st meter.ServiceStatus) bool { return st.Err == nil })
	if out := logs.String(); !strings.Contains(out, "meter worker running") {
		t.Errorf("the end of the failures is not logged:\n%s", out)
	}
}

// TestServiceRetriesAtOnceAfterAHealthyRun: the service's wait between
// attempts grew with each failure (0.5 s, doubling, up to 10 s) and never
// shrank: after hours of work, one failure waited the longest wait. A Run
// that made progress starts the waits again from 0.5 s.
func TestServiceRetriesAtOnceAfterAHealthyRun(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	ctx := context.Background()
	js := metertest.NewStream(t)
	svc := meter.NewService(js, ledgertest.NewStore(t), meter.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	_, stopDeleting := deleteConsumerWhileRunning(js)
	defer stopDeleting()
	svc.Start()
	defer stopService(t, svc)
	// Failures at 0, 0.5, 1.5 and 3.5 s: the next attempt, at 7.5 s, runs,
	// and the wait after it was 8 s.
	waitStatus(t, svc, "failed", func(st meter.ServiceStatus) bool { return st.Err != nil })
	time.Sleep(5500 * time.Millisecond)
	stopDeleting()
	waitStatus(t, svc, "running", func(st meter.ServiceStatus) bool { return st.Err == nil })

	// The worker runs; its consumer is lost once.
	if err := js.DeleteConsumer(ctx, meter.DefaultStreamName, "tollgate-meter"); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	for {
		_, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		if time.Since(lost) > 3*time.Second {
			t.Fatalf("the consumer is not set up again 3 s after a healthy worker lost it: the wait did not start again from 0.5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("consumer set up again %s after it was lost", time.Since(lost).Round(time.Millisecond))
	waitStatus(t, svc, "running", func(st meter.ServiceStatus) bool { return st.Err == nil })
}
