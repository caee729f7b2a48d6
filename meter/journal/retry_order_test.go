package journal

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// failGate is a slog handler that holds the journal's first "writes fail"
// error until released: the records buffered meanwhile come while a failed
// write's records are out of the buffer.
type failGate struct {
	slog.Handler
	once              sync.Once
	entered, released chan struct{}
}

func (g *failGate) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelError && strings.HasPrefix(r.Message, "crash journal: writes fail") {
		g.once.Do(func() { close(g.entered); <-g.released })
	}
	return g.Handler.Handle(ctx, r)
}

// holdFirstFailure installs a failGate as the default logger and waits
// for fn's first failed write to reach it; release lets it go on.
func holdFirstFailure(t *testing.T, fn func()) (release func()) {
	t.Helper()
	g := &failGate{Handler: slog.NewTextHandler(os.Stderr, nil), entered: make(chan struct{}), released: make(chan struct{})}
	prev := slog.Default()
	slog.SetDefault(slog.New(g))
	t.Cleanup(func() { slog.SetDefault(prev) })
	fn()
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no write failed")
	}
	return func() { close(g.released) }
}

// failWrites makes j's segment writes fail (its file, opened read-only,
// in its place) until the returned func puts the segment back.
func failWrites(t *testing.T, j *Journal) (restore func()) {
	t.Helper()
	ro, err := os.Open(segPath(j.dir, j.segNum, j.seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	j.fmu.Lock()
	rw := j.seg
	j.seg = ro
	j.fmu.Unlock()
	return func() { j.seg = rw } // while the failing write holds fmu
}

// reopenSpend closes j and returns the spend charges the next Open
// recovers, and the requests.
func reopenSpend(t *testing.T, j *Journal) (string, []Request) {
	t.Helper()
	j.Close()
	j2, reqs, err := Open(j.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	return string(j2.RecoveredSpendCharges()), reqs
}

// TestJournalWriterRetryKeepsRecordsInOrder: the writer's write fails (a
// full disk); what was buffered while it failed must go after the failed
// write's records when it is retried. Put before them (a mutant of the
// writer's retry), an older spend snapshot landed after a newer one, and
// the next start recovered the older: the spend admitted in between was
// forgotten.
func TestJournalWriterRetryKeepsRecordsInOrder(t *testing.T) {
	j, _, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	restore := failWrites(t, j)
	release := holdFirstFailure(t, func() { j.SpendCharges([]byte(`{"n":1}`)) })
	j.SpendCharges([]byte(`{"n":2}`))
	restore()
	release()
	if spend, _ := reopenSpend(t, j); spend != `{"n":2}` {
		t.Errorf("recovered spend charges %s, want the last journaled, {\"n\":2}", spend)
	}
}

// TestJournalFailedBeginKeepsRecordsInOrder: as
// TestJournalWriterRetryKeepsRecordsInOrder, for a begin's own write (it
// writes what was buffered before it, with its record) that fails.
func TestJournalFailedBeginKeepsRecordsInOrder(t *testing.T) {
	j, _, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	restore := failWrites(t, j)
	// Buffered as SpendCharges does, without waking the writer: the
	// begin's write takes it.
	j.mu.Lock()
	j.spend = []byte(`{"n":1}`)
	j.buf = appendSpend(j.buf, j.spend, j.seed)
	j.mu.Unlock()
	e := testEvent(1)
	begun := make(chan struct{})
	release := holdFirstFailure(t, func() {
		go func() { j.Begin(e, []byte("{}")); close(begun) }()
	})
	j.SpendCharges([]byte(`{"n":2}`))
	restore()
	release()
	<-begun
	spend, reqs := reopenSpend(t, j)
	if spend != `{"n":2}` {
		t.Errorf("recovered spend charges %s, want the last journaled, {\"n\":2}", spend)
	}
	if len(reqs) != 1 || reqs[0].Event.ID != e.ID {
		t.Errorf("recovered %d requests, want the one begun", len(reqs))
	}
}
