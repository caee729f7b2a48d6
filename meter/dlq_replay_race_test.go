package meter_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// setAsideLetters publishes n dead letters, each an event of its own id,
// and returns their sequences.
func setAsideLetters(t *testing.T, ctx context.Context, js jetstream.JetStream, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := range n {
		id := "evt-" + strconv.Itoa(i)
		msg := nats.NewMsg(meter.DLQSubject)
		msg.Data = []byte(`{"v":1,"id":"` + id + `"}`)
		msg.Header.Set(meter.HeaderReason, "refused")
		msg.Header.Set(meter.HeaderEventID, id)
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	return seqs
}

// TestTwoReplaysAtOnce: two operators replay every dead letter at the
// same time (or one retries while the first still runs). Each letter goes
// back to the usage stream once (the same Nats-Msg-Id from both), both
// replays end without error, and together they count each letter once.
// Before, the replay that found a letter removed by the other under it
// stopped there with a server error ("remove replayed dead letter 1: …
// no message found": exit 1, HTTP 500), though nothing had gone wrong.
// Two replays of the same named letters likewise.
func TestTwoReplaysAtOnce(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq := mustDLQ(t, js)
	const letters = 300
	for _, named := range []bool{false, true} {
		seqs := setAsideLetters(t, ctx, js, letters)
		before := usageLastSeq(t, ctx, js)
		var wg sync.WaitGroup
		ns, errs := make([]int, 2), make([]error, 2)
		for i := range 2 {
			wg.Go(func() {
				if named {
					ns[i], errs[i] = dlq.Replay(ctx, seqs)
				} else {
					ns[i], errs[i] = dlq.Replay(ctx, nil)
				}
			})
		}
		wg.Wait()
		for i := range 2 {
			var nf *meter.NoDeadLetterError
			if errs[i] != nil && !(named && errors.As(errs[i], &nf)) {
				t.Errorf("named %v: replay %d = %d, %v; want no error (a letter the other replayed first is not a failure)", named, i, ns[i], errs[i])
			}
		}
		if got := usageLastSeq(t, ctx, js) - before; got != letters {
			t.Errorf("named %v: %d messages reached the usage stream; want each of the %d letters once", named, got, letters)
		}
		if !named && ns[0]+ns[1] != letters {
			t.Errorf("the two replays counted %d and %d letters; want %d together", ns[0], ns[1], letters)
		}
		if left, err := dlq.List(ctx, 0, 10); err != nil || len(left) != 0 {
			t.Errorf("named %v: %d letters left, %v; want none", named, len(left), err)
		}
	}
}

// TestTwoRemovesAtOnce: two operators remove the same dead letters at
// once. One removes them; the other is told a letter is not there (not
// found: HTTP 404, exit code 3), as when it comes second, not given a
// server error because the first removed a letter under it.
func TestTwoRemovesAtOnce(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq := mustDLQ(t, js)
	dlq.SetLog(slog.New(slog.DiscardHandler))
	seqs := setAsideLetters(t, ctx, js, 300)
	var wg sync.WaitGroup
	ns, errs := make([]int, 2), make([]error, 2)
	for i := range 2 {
		wg.Go(func() { ns[i], errs[i] = dlq.Remove(ctx, seqs) })
	}
	wg.Wait()
	for i := range 2 {
		var nf *meter.NoDeadLetterError
		if errs[i] != nil && !errors.As(errs[i], &nf) {
			t.Errorf("remove %d = %d, %v; want done, or a letter not found", i, ns[i], errs[i])
		}
	}
	if left, err := dlq.List(ctx, 0, 10); err != nil || len(left) != 0 {
		t.Errorf("%d letters left, %v; want none", len(left), err)
	}
}
