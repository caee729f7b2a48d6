package meter_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// refusingStore is the real ledger refusing, as rating refuses an event
// whose cost cannot be computed (*usage.RefusedError), the first event of
// a batch whose id is in refuse: nothing of that batch is stored. When
// hold is set, a batch it does not refuse says on begun that it has come,
// and waits for hold to close before it is written.
type refusingStore struct {
	*ledger.Store
	refuse []string
	hold   chan struct{}
	begun  chan struct{}
}

func (s *refusingStore) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	for i := range events {
		if slices.Contains(s.refuse, events[i].ID) {
			return 0, &usage.RefusedError{ID: events[i].ID, Reason: "refused by the test"}
		}
	}
	if s.hold != nil {
		select {
		case s.begun <- struct{}{}:
		default:
		}
		<-s.hold
	}
	return s.Store.WriteEvents(ctx, events)
}

// TestWorkerSetsAsideTheEventsTheStoreRefusesByID: a batch the store
// refuses naming one event (*usage.RefusedError) loses that event alone to
// the dead-letter stream, with the store's reason, whether it is the
// batch's first event or one in the middle; every other event of the
// batch lands once, and every message is acknowledged.
func TestWorkerSetsAsideTheEventsTheStoreRefusesByID(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.NewStream(t)
	customer := uuid.NewString()
	events := make([]usage.Event, 8)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	for i := range events {
		events[i] = groupEvent(customer, int64(i+1))
		if err := pub.Publish(ctx, &events[i]); err != nil {
			t.Fatal(err)
		}
	}
	store := &refusingStore{Store: ledgertest.NewStore(t), refuse: []string{events[0].ID, events[5].ID}}
	// Published before the worker starts, and within one batch: the
	// refusals come from one batch's attempts.
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: 50, BatchWait: time.Second})
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	row := waitUsage(t, store.Store, customer, int64(len(events)-2))
	if want := int64(2 + 3 + 4 + 5 + 7 + 8); row.PromptTokens != want {
		t.Errorf("prompt tokens %d, want %d: the events not refused", row.PromptTokens, want)
	}
	letters := deadLettersOnceDrained(t, ctx, js, cons)
	var set []string
	for _, l := range letters {
		if l.Reason != "refused by the test" {
			t.Errorf("dead letter %s: reason %q, want the store's", l.EventID, l.Reason)
		}
		set = append(set, l.EventID)
	}
	if slices.Sort(set); !slices.Equal(set, slices.Sorted(slices.Values(store.refuse))) {
		t.Errorf("set aside %v, want %v", set, store.refuse)
	}
	if info, err := cons.Info(ctx); err != nil || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("consumer %+v (%v): every message acknowledged once written or set aside", info, err)
	}
}

// TestAGroupIsAcknowledgedOnceAllItsEventsAre: the store refuses one
// event of a group, which is set aside, while the other is still to be
// written (held, as by a ledger that hangs): the group's message is not
// acknowledged until that one is written too, or a worker dying then would
// lose it.
func TestAGroupIsAcknowledgedOnceAllItsEventsAre(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.NewStream(t)
	customer := uuid.NewString()
	var lines [][]byte
	events := []usage.Event{groupEvent(customer, 1), groupEvent(customer, 2)}
	for i := range events {
		line, err := events[i].AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	publishGroup(t, js, events[0].ID, lines...)
	store := &refusingStore{Store: ledgertest.NewStore(t), refuse: []string{events[1].ID},
		hold: make(chan struct{}), begun: make(chan struct{}, 1)}
	release := sync.OnceFunc(func() { close(store.hold) })
	defer release() // a failed test's worker stops
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{})
	select {
	case <-store.begun: // the refused event was set aside before
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not write the group's other events")
	}
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(ctx); err != nil || info.NumAckPending != 1 {
		t.Fatalf("consumer %+v (%v): want the group unacknowledged while one of its events is not written", info, err)
	}
	release()
	waitAllAcked(t, js, "the group acknowledged once written")
	if row := waitUsage(t, store.Store, customer, 1); row.PromptTokens != 1 {
		t.Fatalf("prompt tokens %d, want the event not refused's 1", row.PromptTokens)
	}
}
