package meter_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// setAsideGroup publishes data under a Tollgate-Events header of header
// (a malformed group), waits for the worker to set it aside whole, and
// returns its dead letter.
func setAsideGroup(t *testing.T, ctx context.Context, js jetstream.JetStream, dlq *meter.DLQ, header string, data []byte) usage.DeadLetter {
	t.Helper()
	m := &nats.Msg{Subject: meter.DefaultSubject, Data: data, Header: nats.Header{meter.HeaderEvents: []string{header}}}
	if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(uuid.NewString())); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		letters, err := dlq.List(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range letters {
			if strings.HasPrefix(l.Reason, "malformed group") && len(l.Data) <= len(data) && l.Data == string(data[:len(l.Data)]) {
				return l
			}
		}
	}
	t.Fatalf("the malformed group (Tollgate-Events: %s) was not set aside", header)
	return usage.DeadLetter{}
}

// encodeEvent is e's JSON, as a Publisher writes it.
func encodeEvent(t *testing.T, e usage.Event) []byte {
	t.Helper()
	b, err := e.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// usageLastSeq is the usage stream's last sequence: it moves with every
// message stored, and not when JetStream drops a duplicate (nor when the
// workers trim the stream).
func usageLastSeq(t *testing.T, ctx context.Context, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// TestReplayOfAMalformedGroupWritesItsEvents: a group whose header does
// not match its lines is set aside whole, and Replay sent its data back
// without the header, where the worker read it as one event that does
// not decode and set it aside again: its events could never reach the
// ledger. Replayed as its events, each line on its own, the good ones
// land and the bad one is set aside again alone, with its own reason and
// the id its JSON gives.
func TestReplayOfAMalformedGroupWritesItsEvents(t *testing.T) {
	ctx, store, js := meteredWorker(t)
	dlq := mustDLQ(t, js)
	customer := uuid.NewString()
	e1, e2 := groupEvent(customer, 10), groupEvent(customer, 20)
	badID := uuid.NewString()
	data := bytes.Join([][]byte{encodeEvent(t, e1), []byte(`{"v":99,"id":"` + badID + `"}`), encodeEvent(t, e2)}, []byte{'\n'})
	letter := setAsideGroup(t, ctx, js, dlq, "2", data) // three lines under a count of 2

	if n, err := dlq.Replay(ctx, []uint64{letter.Seq}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want the one dead letter", n, err)
	}
	if row := waitUsage(t, store, customer, 2); row.PromptTokens != 30 {
		t.Fatalf("usage %+v; want the group's two good events (10+20 prompt tokens)", row)
	}
	letters := waitLetters(t, ctx, dlq, 1)
	if len(letters) != 1 || letters[0].Seq == letter.Seq || letters[0].EventID != badID ||
		!strings.Contains(letters[0].Reason, "schema version 99") || strings.Contains(letters[0].Data, "\n") {
		t.Fatalf("dead letters after the replay: %+v; want the bad line alone, as event %s", letters, badID)
	}
}

// TestReplayOfAGroupTwiceCountsOnce: a replay that published a group's
// events and crashed before it removed the dead letter is run again; the
// same messages go out under the same Nats-Msg-Ids, which JetStream drops
// as duplicates, and no two lines share one (the second is not dropped as
// the first's duplicate). The dead-letter stream refusing deletes stands
// in for the crash.
func TestReplayOfAGroupTwiceCountsOnce(t *testing.T) {
	ctx, store, js := meteredWorker(t)
	dlq := mustDLQ(t, js)
	customer := uuid.NewString()
	e1, e2 := groupEvent(customer, 10), groupEvent(customer, 20)
	letter := setAsideGroup(t, ctx, js, dlq, "3", bytes.Join([][]byte{encodeEvent(t, e1), encodeEvent(t, e2)}, []byte{'\n'}))
	metertest.EditStream(t, js, meter.DLQStream, func(c *jetstream.StreamConfig) { c.DenyDelete = true })

	before := usageLastSeq(t, ctx, js)
	if n, err := dlq.Replay(ctx, []uint64{letter.Seq}); err == nil || n != 0 {
		t.Fatalf("Replay with deletes refused = %d, %v; want an error and none replayed", n, err)
	}
	if row := waitUsage(t, store, customer, 2); row.PromptTokens != 30 {
		t.Fatalf("usage %+v; want the group's two events (10+20 prompt tokens)", row)
	}
	first := usageLastSeq(t, ctx, js)
	if first != before+2 {
		t.Fatalf("the replay stored %d messages; want 2, one an event", first-before)
	}
	if _, err := dlq.Replay(ctx, []uint64{letter.Seq}); err == nil {
		t.Fatal("Replay again with deletes refused: no error")
	}
	if again := usageLastSeq(t, ctx, js); again != first {
		t.Fatalf("the replay run again stored %d messages; want none (duplicates of the first run)", again-first)
	}
	time.Sleep(200 * time.Millisecond)
	if row := waitUsage(t, store, customer, 2); row.PromptTokens != 30 {
		t.Fatalf("usage %+v after two replays; want each event once", row)
	}
}

// TestReplayOfABlankGroupPublishesNothing: a malformed group of blank
// lines holds no event: its replay publishes nothing (no message for the
// worker to set aside again) and removes it.
func TestReplayOfABlankGroupPublishesNothing(t *testing.T) {
	ctx, _, js := meteredWorker(t)
	dlq := mustDLQ(t, js)
	letter := setAsideGroup(t, ctx, js, dlq, "2", []byte("\n \n\t\n"))
	before := usageLastSeq(t, ctx, js)
	if n, err := dlq.Replay(ctx, []uint64{letter.Seq}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want the one dead letter", n, err)
	}
	if after := usageLastSeq(t, ctx, js); after != before {
		t.Fatalf("the replay of blank lines stored %d messages; want none", after-before)
	}
	if left, err := dlq.List(ctx, 0, 10); err != nil || len(left) != 0 {
		t.Fatalf("dead letters after the replay: %+v, %v; want none", left, err)
	}
}

// TestReplayRefusesACutGroup: a malformed group over 512 KiB is set aside
// cut, its last line not whole, so it cannot be replayed as its events. A
// replay naming it, or of every dead letter, is refused as a conflict
// naming its sequence, and nothing is replayed, as for a sequence not
// held; the other dead letters replay when named.
func TestReplayRefusesACutGroup(t *testing.T) {
	ctx, _, js := meteredWorker(t)
	dlq := mustDLQ(t, js)
	customer := uuid.NewString()
	long := bytes.Repeat([]byte("x"), 600<<10)
	cut := setAsideGroup(t, ctx, js, dlq, "5", bytes.Join([][]byte{encodeEvent(t, groupEvent(customer, 1)), encodeEvent(t, groupEvent(customer, 2)), long}, []byte{'\n'}))
	if !strings.Contains(cut.Reason, "cut") || len(cut.Data) >= 600<<10 {
		t.Fatalf("dead letter %+v; want it cut", cut.Reason)
	}
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).PublishData(ctx, uuid.NewString(), []byte(`{"v":99}`)); err != nil {
		t.Fatal(err)
	}
	letters := waitLetters(t, ctx, dlq, 2)
	if len(letters) != 2 {
		t.Fatalf("%d dead letters; want the cut group and the poison", len(letters))
	}
	poison := letters[1].Seq
	before := usageLastSeq(t, ctx, js)
	for _, seqs := range [][]uint64{{poison, cut.Seq}, nil} {
		n, err := dlq.Replay(ctx, seqs)
		var conflict interface{ Conflict() bool }
		if !errors.As(err, &conflict) || !conflict.Conflict() || n != 0 ||
			!strings.Contains(err.Error(), "dead letter "+strconv.FormatUint(cut.Seq, 10)) || !strings.Contains(err.Error(), "cut") {
			t.Fatalf("Replay(%v) = %d, %v; want a conflict naming dead letter %d as cut, and none replayed", seqs, n, err, cut.Seq)
		}
	}
	if after := usageLastSeq(t, ctx, js); after != before {
		t.Fatalf("refused replays stored %d messages; want none", after-before)
	}
	if left, err := dlq.List(ctx, 0, 10); err != nil || len(left) != 2 {
		t.Fatalf("dead letters after refused replays: %d, %v; want both", len(left), err)
	}
	if n, err := dlq.Replay(ctx, []uint64{poison}); err != nil || n != 1 {
		t.Fatalf("Replay of the poison alone = %d, %v", n, err)
	}
}

// TestReplayRefusesAGroupOfMoreEventsThanAGroupHolds: a malformed group
// is replayed a message a line, and a group holds at most 16 events; a
// letter of more lines (512 KiB of short lines would be thousands of
// messages, each set aside again alone) is refused as a conflict, nothing
// replayed.
func TestReplayRefusesAGroupOfMoreEventsThanAGroupHolds(t *testing.T) {
	ctx, _, js := meteredWorker(t)
	dlq := mustDLQ(t, js)
	customer := uuid.NewString()
	lines := make([][]byte, meter.MaxGroupEvents+1)
	for i := range lines {
		lines[i] = encodeEvent(t, groupEvent(customer, 1))
	}
	letter := setAsideGroup(t, ctx, js, dlq, strconv.Itoa(len(lines)), bytes.Join(lines, []byte{'\n'}))
	before := usageLastSeq(t, ctx, js)
	n, err := dlq.Replay(ctx, []uint64{letter.Seq})
	var conflict interface{ Conflict() bool }
	if !errors.As(err, &conflict) || n != 0 || !strings.Contains(err.Error(), "more than "+strconv.Itoa(meter.MaxGroupEvents)) {
		t.Fatalf("Replay = %d, %v; want a conflict: more than %d events", n, err, meter.MaxGroupEvents)
	}
	if after := usageLastSeq(t, ctx, js); after != before {
		t.Fatalf("a refused replay stored %d messages; want none", after-before)
	}
}
