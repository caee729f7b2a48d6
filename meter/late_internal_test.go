package meter

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestLateEventsLoggedOnceABatch: a batch of late events (a spool drained
// days after a month's end) is one warning with the count, naming the
// first, not a line per event; a batch with none logs nothing.
func TestLateEventsLoggedOnceABatch(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var none lateEvents
	none.log(log)
	if buf.Len() != 0 {
		t.Fatalf("a batch with no late event logged %q", buf.String())
	}
	at := time.Date(2026, 10, 31, 23, 59, 59, 0, time.UTC)
	received := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
	var late lateEvents
	for i, id := range []string{"first", "second", "third"} {
		late.add(&usage.Event{ID: id, CustomerID: "c", Time: at.Add(-time.Duration(i) * time.Hour)}, received)
	}
	late.log(log)
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "events=3") || !strings.Contains(out, "event_id=first") ||
		!strings.Contains(out, "period=2026-10") || strings.Contains(out, "second") {
		t.Errorf("three late events logged %q; want one line with events=3 naming the first and its period", out)
	}
}

// TestLateEventsLogKeepsItsOwnTime: the late events' warning names the
// first event's time as event_time. Named time, it was a second "time"
// member beside the record's own in the JSON log, and a log pipeline
// (which keeps the last of two) filed the warning under the late event's
// month, weeks before it was logged.
func TestLateEventsLogKeepsItsOwnTime(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	at := time.Date(2026, 10, 31, 23, 59, 59, 0, time.UTC)
	var late lateEvents
	late.add(&usage.Event{ID: "first", CustomerID: "c", Time: at}, at.AddDate(0, 0, 3))
	before := time.Now()
	late.log(log)
	assertOneTimeMember(t, buf.Bytes(), before)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["event_time"] != at.Format(time.RFC3339Nano) {
		t.Errorf("event_time = %v, want %s: %s", rec["event_time"], at.Format(time.RFC3339Nano), buf.Bytes())
	}
}

// assertOneTimeMember fails unless line, a JSON log record, has one "time"
// member, the record's own: written at or after before.
func assertOneTimeMember(t *testing.T, line []byte, before time.Time) {
	t.Helper()
	if n := bytes.Count(line, []byte(`"time":`)); n != 1 {
		t.Fatalf(`log record with %d "time" members, want 1 (the record's): %s`, n, line)
	}
	var rec struct{ Time time.Time }
	if err := json.Unmarshal(line, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Time.Before(before.Add(-time.Second)) {
		t.Errorf("the record's time is %s, before it was logged (%s): %s", rec.Time, before, line)
	}
}
