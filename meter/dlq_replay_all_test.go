package meter_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// putLetter stores a dead letter of data with reason straight on the
// dead-letter stream, as the worker's put would, and returns its sequence.
func putLetter(t *testing.T, ctx context.Context, js jetstream.JetStream, reason, eventID string, data []byte) uint64 {
	t.Helper()
	m := nats.NewMsg(meter.DLQSubject)
	m.Data = data
	m.Header.Set(meter.HeaderReason, reason)
	m.Header.Set(meter.HeaderEventID, eventID)
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// TestReplayOfEveryLetterGoesPageByPage: replaying every dead letter held
// them all in memory at once (a dead-letter stream has no limit, and a
// letter is up to 512 KiB); it now reads them a page at a time. Every
// letter is still checked before any is sent: an unreplayable letter on
// the last page leaves every letter where it was, and once it is removed
// every other letter, over several pages, goes back once and leaves the
// dead-letter stream.
func TestReplayOfEveryLetterGoesPageByPage(t *testing.T) {
	defer meter.SetReplayPage(3)()
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq := mustDLQ(t, js)
	const good = 8
	ids := map[string]bool{}
	for i := range good {
		id := uuid.NewString()
		ids[id] = true
		putLetter(t, ctx, js, "test: set aside "+strconv.Itoa(i), id, []byte(`{"id":"`+id+`"}`))
	}
	bad := putLetter(t, ctx, js, "malformed group: 2 lines, header says 3"+fmt.Sprintf(meter.CutNote, 900000, 524288), "", []byte("{\"a\":1}\n{\"b\""))
	before := usageLastSeq(t, ctx, js)

	n, err := dlq.Replay(ctx, nil)
	var unreplayable *meter.UnreplayableError
	if !errors.As(err, &unreplayable) || unreplayable.Seq != bad || n != 0 {
		t.Fatalf("Replay(all) = %d, %v; want dead letter %d refused and none replayed", n, err, bad)
	}
	if after := usageLastSeq(t, ctx, js); after != before {
		t.Fatalf("a refused replay of every letter sent %d messages; want none", after-before)
	}
	if left, err := dlq.List(ctx, 0, 100); err != nil || len(left) != good+1 {
		t.Fatalf("dead letters after the refused replay: %d, %v; want %d", len(left), err, good+1)
	}

	if removed, err := dlq.Remove(ctx, []uint64{bad}); err != nil || removed != 1 {
		t.Fatalf("Remove(%d) = %d, %v", bad, removed, err)
	}
	if n, err := dlq.Replay(ctx, nil); err != nil || n != good {
		t.Fatalf("Replay(all) = %d, %v; want %d", n, err, good)
	}
	if after := usageLastSeq(t, ctx, js); after != before+good {
		t.Fatalf("replay of every letter stored %d messages; want %d", after-before, good)
	}
	if left, err := dlq.List(ctx, 0, 100); err != nil || len(left) != 0 {
		t.Fatalf("dead letters after replaying every one: %d, %v; want none", len(left), err)
	}
	s, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	for seq := before + 1; seq <= before+good; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get(meter.HeaderEventID)
		if !ids[id] || !strings.Contains(string(m.Data), id) {
			t.Fatalf("usage message %d: event %q, data %s; want one of the letters, once", seq, id, m.Data)
		}
		delete(ids, id)
	}
}

// TestReplayProgress: ReplayProgress reports how many dead letters it
// replays in all, once every one is checked, and then the count after
// each letter, for every letter and for named ones: a replay of an
// outage's letters ran for minutes with nothing to show for it.
func TestReplayProgress(t *testing.T) {
	defer meter.SetReplayPage(2)()
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq := mustDLQ(t, js)
	var seqs []uint64
	for i := range 5 {
		id := uuid.NewString()
		seqs = append(seqs, putLetter(t, ctx, js, "test: set aside "+strconv.Itoa(i), id, []byte(`{"id":"`+id+`"}`)))
	}
	check := func(what string, calls [][2]int, n, want int) {
		t.Helper()
		if n != want || len(calls) != want+1 {
			t.Fatalf("%s: replayed %d, progress %v; want %d and a call before and after each letter", what, n, calls, want)
		}
		for i, c := range calls {
			if c != [2]int{i, want} {
				t.Fatalf("%s: progress %v; want (0, %d) to (%d, %d) by one", what, calls, want, want, want)
			}
		}
	}
	var calls [][2]int
	n, err := dlq.ReplayProgress(ctx, seqs[3:], func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	check("named letters", calls, n, 2)
	calls = nil
	n, err = dlq.ReplayProgress(ctx, nil, func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	check("every letter", calls, n, 3)
}
