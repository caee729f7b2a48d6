package keys

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// listenFailSource is a Source whose listening connection fails at once,
// as it does while Postgres is down; nothing else of it is called.
type listenFailSource struct{ Source }

func (listenFailSource) ListenKeyChanges(ctx context.Context, wake func()) error {
	return errors.New("failed to connect: connection refused")
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestListenFailureLoggedOncePerOutage: a Postgres outage gives one line
// saying the listener is down, not one a second for as long as it lasts,
// as the Syncer's other loops (run, keepMark) log once per run of failures.
func TestListenFailureLoggedOncePerOutage(t *testing.T) {
	var buf lockedBuf
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	open := func(ctx context.Context) (Buckets, error) { <-ctx.Done(); return Buckets{}, ctx.Err() }
	s := NewSyncer(listenFailSource{}, open, log)
	s.Start()
	time.Sleep(2500 * time.Millisecond) // two retries at least
	_ = s.Stop(context.Background())
	n := strings.Count(buf.String(), "listening for changes failed")
	if n > 1 {
		t.Fatalf("a 2.5 s outage logged %d lines of \"key sync: listening for changes failed\" (one a second, ~3600 an hour); want 1", n)
	}
}
