package meter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestSpoolAgeIsOfTheOldestEventLeft: the age Stats gives (which
// meter.spool_max_age holds the gateway to, answering 503 past it) was the
// age of the first event spooled since the spool was last empty, whatever
// had been published since: after an outage past spool_max_age, the
// gateway refused every request until the whole backlog was sent, though
// what was left was new. It is now the age of the oldest event not yet
// published (to the second: appends are timed a second apart at most).
func TestSpoolAgeIsOfTheOldestEventLeft(t *testing.T) {
	s, err := meter.OpenSpool(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(testEvent(1)); err != nil {
		t.Fatal(err)
	}
	// The spool's ages are wall-clock time: two appends more than a
	// second apart.
	time.Sleep(1100 * time.Millisecond)
	beforeSecond := time.Now()
	if err := s.Append(testEvent(2)); err != nil {
		t.Fatal(err)
	}
	if events, _, age := s.Stats(); events != 2 || age < 1100*time.Millisecond {
		t.Fatalf("Stats after two appends 1.1 s apart: %d events, the oldest %v old", events, age)
	}
	// The first event is published, the second refused.
	refused, calls := errors.New("refused"), 0
	if sent, err := s.Drain(context.Background(), func(context.Context, []byte) error {
		if calls++; calls > 1 {
			return refused
		}
		return nil
	}); sent != 1 || !errors.Is(err, refused) {
		t.Fatalf("Drain: %d sent, %v; want 1 and the refusal", sent, err)
	}
	events, _, age := s.Stats()
	if bound := time.Since(beforeSecond); events != 1 || age > bound {
		t.Errorf("Stats once the first event is published: %d events, the oldest %v old; want 1, at most %v (the second's age)",
			events, age, bound)
	}
}
