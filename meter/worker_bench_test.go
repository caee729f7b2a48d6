package meter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// countingStore takes every event and keeps only their count: a worker
// benchmark's Store, for the worker's own cost without a database's.
type countingStore struct{ n atomic.Int64 }

func (s *countingStore) WriteEvents(_ context.Context, events []usage.Event) (int, error) {
	s.n.Add(int64(len(events)))
	return len(events), nil
}

// BenchmarkWorkerMovesEvents is a meter worker's own cost per event: b.N
// events stored in the usage stream beforehand (the embedded server, file
// storage), then one worker with the default configuration decodes,
// batches, "writes" them (a Store that only counts: no Postgres, whose
// commits would dominate) and acknowledges them; the clock runs from the
// worker's set-up until the consumer's ack floor reaches the last event.
// ns/op is per event, NATS' own work included.
func BenchmarkWorkerMovesEvents(b *testing.B) {
	js := metertest.NewStream(b)
	ctx := context.Background()
	var buf []byte
	for i := range b.N {
		e := testEvent(i)
		buf, _ = e.AppendJSON(buf[:0])
		msg := nats.NewMsg(meter.DefaultSubject)
		msg.Data = append([]byte(nil), buf...)
		msg.Header.Set(nats.MsgIdHdr, e.ID)
		for {
			_, err := js.PublishMsgAsync(msg)
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				b.Fatal(err)
			}
			<-js.PublishAsyncComplete() // the server behind (a loaded machine): let it catch up
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("publishing the events took over 5 minutes")
	}
	if s, err := js.Stream(ctx, meter.DefaultStreamName); err != nil || s.CachedInfo().State.Msgs != uint64(b.N) {
		b.Fatalf("the usage stream holds %+v of %d events (%v)", s, b.N, err)
	}
	store := &countingStore{}
	b.ResetTimer()
	wctx, stop := context.WithCancel(ctx)
	done := metertest.StartWorker(b, wctx, js, store, meter.WorkerConfig{})
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		info, err := cons.Info(ctx)
		if err == nil && info.AckFloor.Stream >= uint64(b.N) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the worker acknowledged up to %d of %d events in 5 minutes (%v)", info.AckFloor.Stream, b.N, err)
		}
	}
	b.StopTimer()
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if n := store.n.Load(); n < int64(b.N) {
		b.Fatalf("the store took %d of %d events", n, b.N)
	}
}
