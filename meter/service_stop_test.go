package meter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestServiceStopReturnsWhenItsContextEnds: Stop waits for the worker to
// write or hand back what it holds, but no longer than its context: with
// the worker held by a ledger that hangs, Stop returns the context's
// error, so that a shutdown goes on and says it did not finish (a Stop
// that returned nil then told it the meter had stopped cleanly); the next
// Stop, once the ledger answers, waits for the worker and returns nil. A
// Service never started stops at once (a shutdown before its start must
// not wait out its whole timeout).
func TestServiceStopReturnsWhenItsContextEnds(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	store := &refusingStore{Store: ledgertest.NewStore(t), hold: make(chan struct{}), begun: make(chan struct{}, 1)}
	release := sync.OnceFunc(func() { close(store.hold) })
	defer release() // a failed test's worker stops

	never := meter.NewService(js, store, meter.WorkerConfig{})
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := never.Stop(sctx); err != nil {
		t.Fatalf("Stop of a service never started: %v; want nil at once", err)
	}
	if err := never.Stop(sctx); err != nil {
		t.Fatalf("Stop again: %v", err)
	}

	svc := meter.NewService(js, store, meter.WorkerConfig{BatchWait: 20 * time.Millisecond})
	svc.Start()
	defer stopService(t, svc)
	e := groupEvent(uuid.NewString(), 1)
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).Publish(ctx, &e); err != nil {
		t.Fatal(err)
	}
	select {
	case <-store.begun:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not begin to write the event")
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := svc.Stop(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop while the worker's write hangs: %v; want the context's deadline", err)
	}
	release()
	sctx, cancel = context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := svc.Stop(sctx); err != nil {
		t.Fatalf("Stop once the write returned: %v; want nil", err)
	}
}
