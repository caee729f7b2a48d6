package meter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestDLQRemove: removing one of two dead letters leaves the other;
// removing a sequence the stream does not hold removes nothing, the
// letters given beside it included; each removal is logged at WARN with
// the letter's sequence, event id, reason and its data, cut to a few KiB:
// removed usage is dropped from billing for good, and the log is what
// remains of it.
func TestDLQRemove(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq := mustDLQ(t, js)
	var logged metertest.LockedBuffer
	dlq.SetLog(slog.New(slog.NewTextHandler(&logged, nil)))
	big := `{"v":1,"id":"evt-big","model":"` + strings.Repeat("m", 100<<10) + `"}`
	var seqs []uint64
	for _, l := range []struct{ data, id, reason string }{
		{big, "evt-big", "malformed group: cut; set aside whole"},
		{`{"v":7}`, "evt-7", "schema version 7"},
	} {
		msg := nats.NewMsg(meter.DLQSubject)
		msg.Data = []byte(l.data)
		msg.Header.Set(meter.HeaderReason, l.reason)
		msg.Header.Set(meter.HeaderEventID, l.id)
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}

	n, err := dlq.Remove(ctx, []uint64{seqs[0], seqs[0]})
	if err != nil || n != 1 {
		t.Fatalf("Remove = %d, %v; want 1", n, err)
	}
	left, err := dlq.List(ctx, 0, 10)
	if err != nil || len(left) != 1 || left[0].Seq != seqs[1] {
		t.Fatalf("after Remove: %+v, %v; want only letter %d", left, err, seqs[1])
	}
	line := logged.String()
	for _, want := range []string{"level=WARN", "seq=" + strconv.FormatUint(seqs[0], 10), "event_id=evt-big",
		`reason="malformed group: cut; set aside whole"`, `{\"v\":1,\"id\":\"evt-big\",\"model\":\"mmmm`, "data_bytes=" + strconv.Itoa(len(big))} {
		if !strings.Contains(line, want) {
			t.Fatalf("log %.600q lacks %q", line, want)
		}
	}
	if len(line) > 8<<10 {
		t.Fatalf("log line of %d bytes: the data is not cut", len(line))
	}

	n, err = dlq.Remove(ctx, []uint64{seqs[1], 999})
	var nf *meter.NoDeadLetterError
	if !errors.As(err, &nf) || nf.Seq != 999 || n != 0 {
		t.Fatalf("Remove with an unknown sequence = %d, %v; want 0 and dead letter 999 not found", n, err)
	}
	if left, _ := dlq.List(ctx, 0, 10); len(left) != 1 {
		t.Fatalf("after a refused Remove %d letters are left, want 1", len(left))
	}
	if _, err := dlq.Remove(ctx, []uint64{seqs[0]}); !errors.As(err, &nf) {
		t.Fatalf("Remove of a removed letter = %v, want not found", err)
	}
}

// TestDLQRemoveLogKeepsItsOwnTime: the WARN line of a removed letter, the
// only record of its usage left, names when the letter was set aside as
// dead_lettered_at. Named time, it was a second "time" member beside the
// record's own in the JSON log, and a log pipeline (which keeps the last
// of two) filed the line under the letter's time, not the removal's.
func TestDLQRemoveLogKeepsItsOwnTime(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq := mustDLQ(t, js)
	var logged metertest.LockedBuffer
	dlq.SetLog(slog.New(slog.NewJSONHandler(&logged, nil)))
	msg := nats.NewMsg(meter.DLQSubject)
	msg.Data = []byte(`{"v":7}`)
	msg.Header.Set(meter.HeaderReason, "schema version 7")
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	letters, err := dlq.List(ctx, 0, 10)
	if err != nil || len(letters) != 1 {
		t.Fatalf("List = %+v, %v; want the letter", letters, err)
	}
	time.Sleep(20 * time.Millisecond) // the removal's time differs from the letter's
	before := time.Now()
	if n, err := dlq.Remove(ctx, []uint64{ack.Sequence}); err != nil || n != 1 {
		t.Fatalf("Remove = %d, %v; want 1", n, err)
	}
	line := []byte(logged.String())
	if n := bytes.Count(line, []byte(`"time":`)); n != 1 {
		t.Fatalf(`log record with %d "time" members, want 1 (the record's): %s`, n, line)
	}
	var rec struct {
		Time           time.Time
		DeadLetteredAt time.Time `json:"dead_lettered_at"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Time.Before(before) || !rec.DeadLetteredAt.Equal(letters[0].Time) {
		t.Errorf("logged time %s (want at or after %s) and dead_lettered_at %s (want %s): %s",
			rec.Time, before, rec.DeadLetteredAt, letters[0].Time, line)
	}
}
