package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// openStream starts a streamed sim-small chat of tokens chunks, one every
// delayMs, reads its first line, and returns the channel its whole body
// comes on once it ends, and its request id.
func (s *stack) openStream(tokens, delayMs int) (<-chan string, string) {
	s.t.Helper()
	resp := s.post("/v1/chat/completions", `{"model":"sim-small","max_tokens":`+strconv.Itoa(tokens)+`,"stream":true,`+
		`"metadata":{"sim_delay_ms":"`+strconv.Itoa(delayMs)+`"},"messages":[{"role":"user","content":"tell me a long story"}]}`)
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if resp.StatusCode != http.StatusOK || err != nil {
		s.t.Fatalf("the stream: %d %q %v", resp.StatusCode, first, err)
	}
	body := make(chan string, 1)
	go func() {
		rest, _ := io.ReadAll(br)
		body <- first + string(rest)
	}()
	return body, resp.Header.Get("X-Request-Id")
}

// TestShutdownFinishesAStreamWithinTheGrace: a stream in flight when the
// shutdown begins (SIGTERM) is relayed to its end within
// TOLLGATE_SHUTDOWN_GRACE, and its usage is in the ledger once the
// process is back: the gateway's stop waits the grace (a stop given no
// timeout of its own), and the meter stops after it.
func TestShutdownFinishesAStreamWithinTheGrace(t *testing.T) {
	s := newStackEnv(t, nil, func(e *env) { e.ShutdownGrace = time.Minute })
	body, id := s.openStream(8, 100)
	if err := s.app.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if b := <-body; !strings.Contains(b, "data: [DONE]") || strings.Contains(b, "server_shutdown") {
		t.Fatalf("the stream in flight at the shutdown, within its grace, was cut:\n%s", b)
	}
	s.restart()
	if ev := s.event(id); ev.Status != usage.StatusOK || ev.Usage.CompletionTokens < 1 {
		t.Fatalf("the stream finished in the shutdown: status %q, %d completion tokens; want ok", ev.Status, ev.Usage.CompletionTokens)
	}
}

// TestShutdownPastTheGraceIsNoError: a stream still running when the
// grace runs out is cut off and recorded as cut_off, and the shutdown is
// still a clean one (close returns no error, so the process exits 0):
// the grace running out is what it is for.
func TestShutdownPastTheGraceIsNoError(t *testing.T) {
	s := newStackEnv(t, func(c *fileConfig) { c.ShutdownDrain = 200 * time.Millisecond },
		func(e *env) { e.ShutdownGrace = 100 * time.Millisecond })
	body, id := s.openStream(100, 500)
	if err := s.app.close(); err != nil {
		t.Fatalf("close with a stream cut off at the end of the grace: %v, want none", err)
	}
	if b := <-body; !strings.Contains(b, "server_shutdown") {
		t.Fatalf("a 50 s stream not cut off (server_shutdown) after a 100 ms grace:\n%s", b[max(0, len(b)-600):])
	}
	s.restart()
	if ev := s.event(id); ev.Status != usage.StatusCutOff {
		t.Fatalf("the stream cut off at the shutdown: status %q, want %q", ev.Status, usage.StatusCutOff)
	}
}

// TestRestartsLeaveNoJournalSegmentsBehind: a start with nothing to
// recover from the crash journal removes what the last process left there
// all the same: clean restarts do not pile segments up in the data
// directory.
func TestRestartsLeaveNoJournalSegmentsBehind(t *testing.T) {
	s := newStack(t, nil)
	dir := filepath.Join(s.env.DataDir, "journal")
	files := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	first := files()
	s.restart()
	s.restart()
	if after := files(); len(after) != len(first) {
		t.Fatalf("the crash journal held %v at the first start, %v after two clean restarts; want as many files", first, after)
	}
}
