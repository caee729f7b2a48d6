package meter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/usage"
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

// TestSpoolAgeSurvivesARestart: a gateway restarted (a kill -9, a crash
// loop, a deploy) with a backlog NATS has not taken gave it the age of
// nothing: Stats timed every event left from the start, and a gateway held
// to spool_max_age 10m with an hour's backlog and NATS still down served
// again, unmetered, for ten more minutes at every restart. The events left
// are timed, after a restart, by when their requests were received (an
// event is spooled once its request ends: never later than that).
func TestSpoolAgeSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	old, recent := testEvent(1), testEvent(2)
	old.Time = time.Now().Add(-time.Hour)
	recent.Time = time.Now().Add(-time.Minute)
	for _, e := range []*usage.Event{old, recent} {
		if err := s.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if events, _, age := s.Stats(); events != 2 || age < time.Hour {
		t.Errorf("Stats after a restart: %d events, the oldest %v old; want 2, an hour old or more", events, age)
	}
	// The hour-old event is published, the other refused: what is left
	// is a minute old, not an hour.
	refused, calls := errors.New("refused"), 0
	if sent, err := s.Drain(context.Background(), func(context.Context, []byte) error {
		if calls++; calls > 1 {
			return refused
		}
		return nil
	}); sent != 1 || !errors.Is(err, refused) {
		t.Fatalf("Drain: %d sent, %v; want 1 and the refusal", sent, err)
	}
	if events, _, age := s.Stats(); events != 1 || age < time.Minute || age >= time.Hour {
		t.Errorf("Stats once the hour-old event is published: %d events, the oldest %v old; want 1, a minute old", events, age)
	}
}
