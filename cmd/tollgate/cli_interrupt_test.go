package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCLIRerateInterrupted: a rerate stopped with Ctrl-C says it was
// interrupted, that the batches re-rated are kept and that running it
// again finishes the range, in one line, and exits 1; it said only
// "tollgate rerate: context canceled." The server stands in for the
// rerate route: it sends a progress line and then waits, as a long
// re-rating does between batches.
func TestCLIRerateInterrupted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write([]byte(`{"progress":{"examined":2000,"adjusted":1000,"through":"2026-01-02T00:00:00Z"}}` + "\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	var stderr bytes.Buffer
	progressed := make(chan struct{})
	w := writerFunc(func(p []byte) (int, error) {
		n, err := stderr.Write(p)
		if strings.Contains(stderr.String(), "2000 examined") {
			select {
			case <-progressed:
			default:
				close(progressed)
			}
		}
		return n, err
	})
	go func() { <-progressed; cancel(errors.New("interrupt signal received")) }()
	var stdout bytes.Buffer
	args := []string{"rerate", "--from", "2026-01-01", "--to", "2026-02-01", "--progress", "--admin-url", srv.URL}
	code := runCLI(ctx, args, &stdout, w, func(string) string { return "" })
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if code != exitError || !strings.HasPrefix(last, "tollgate rerate: interrupted") || !strings.Contains(last, "again to finish the range") || !strings.Contains(last, "events examined") ||
		strings.Contains(last, "context canceled") || stdout.Len() != 0 {
		t.Fatalf("interrupted rerate: exit %d, stdout %q, stderr %q; want exit 1 and a last line saying it was interrupted and to run it again",
			code, stdout.String(), stderr.String())
	}
}

// TestCLIInterruptedSaysSo: any admin command interrupted before the
// admin API answered says it was interrupted, not "context canceled".
func TestCLIInterruptedSaysSo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	var stdout, stderr bytes.Buffer
	args := []string{"customers", "list", "--admin-url", srv.URL}
	code := runCLI(ctx, args, &stdout, &stderr, func(string) string { return "" })
	checkFail(t, cliResult{code: code, out: stdout.String(), errOut: stderr.String()}, exitError, "tollgate customers list: interrupted", args)
	if strings.Contains(stderr.String(), "context canceled") {
		t.Fatalf("stderr %q names Go's context, not the interruption", stderr.String())
	}
}

// TestCLIDeadLetterReplayInterrupted: a replay stopped with Ctrl-C says
// that the letters replayed before it are out of the dead-letter stream
// and that running it again replays the rest.
func TestCLIDeadLetterReplayInterrupted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	var stdout, stderr bytes.Buffer
	args := []string{"dlq", "replay", "--all", "--admin-url", srv.URL}
	code := runCLI(ctx, args, &stdout, &stderr, func(string) string { return "" })
	checkFail(t, cliResult{code: code, out: stdout.String(), errOut: stderr.String()}, exitError, "tollgate dlq replay: interrupted", args)
	if !strings.Contains(stderr.String(), "run it again") {
		t.Fatalf("stderr %q does not say that running it again replays the rest", stderr.String())
	}
}

// writerFunc is an io.Writer from a func.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
