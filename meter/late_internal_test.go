package meter

import (
	"bytes"
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
