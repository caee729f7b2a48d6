package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// stalledWriter takes its first write, then blocks every later one until
// release is closed, then fails: a client that stopped reading, then left.
type stalledWriter struct {
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	first := false
	w.once.Do(func() { first = true; close(w.started) })
	if first {
		return len(p), nil
	}
	<-w.release
	return 0, errors.New("client gone")
}

// TestStalledExportsDoNotStarveTheLedger: MaxExports exports whose readers
// stopped reading hold their own connections, not the pool's: events are
// still written and statements made meanwhile (a finance review: four
// stalled downloads took the pool's four connections, and the meter's
// writes and the statements timed out). One export more is refused,
// unavailable; once the readers leave, the exports end and another runs.
func TestStalledExportsDoNotStarveTheLedger(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	batch := make([]usage.Event, 0, 3000)
	for i := range cap(batch) {
		batch = append(batch, newEvent(c.ID, k.ID, "m", day.Add(time.Duration(i)*time.Second), usage.Tokens{PromptTokens: 100, CompletionTokens: 50}))
	}
	if _, err := s.WriteEvents(ctx, batch); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	errs := make(chan error, ledger.MaxExports)
	for range ledger.MaxExports {
		w := &stalledWriter{started: make(chan struct{}), release: release}
		go func() {
			_, err := s.ExportLines(ctx, day, day.AddDate(0, 0, 1), w)
			errs <- err
		}()
		select {
		case <-w.started:
		case err := <-errs:
			t.Fatalf("an export ended before its reader stalled: %v", err)
		}
	}
	if _, err := s.ExportLines(ctx, day, day.AddDate(0, 0, 1), &stalledWriter{started: make(chan struct{}), release: release}); ledger.ErrorCode(err) != ledger.EUnavailable {
		t.Fatalf("an export past MaxExports: %v, want unavailable", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for i := range 8 { // more than the pool's connections, one after another
		if _, err := s.WriteEvents(wctx, []usage.Event{newEvent(c.ID, k.ID, "m", day.Add(time.Hour), usage.Tokens{PromptTokens: int64(i + 1)})}); err != nil {
			t.Fatalf("an event write while exports are stalled: %v", err)
		}
	}
	if _, err := s.Statement(wctx, c.ID, "2024-05"); err != nil {
		t.Fatalf("a statement while exports are stalled: %v", err)
	}
	close(release)
	for range ledger.MaxExports {
		if err := <-errs; err == nil {
			t.Fatal("an export whose reader left returned no error")
		}
	}
	var n lineCounter
	if _, err := s.ExportLines(ctx, day, day.AddDate(0, 0, 1), &n); err != nil || int(n) < cap(batch) {
		t.Fatalf("an export after the stalled ones ended: %v, %d lines", err, n)
	}
}

// lineCounter counts the lines written to it.
type lineCounter int

func (c *lineCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\n' {
			*c++
		}
	}
	return len(p), nil
}
