package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		level     string
		info, err bool
	}{
		{"", true, false}, {"info", true, false}, {"DEBUG", true, false},
		{"warn", false, false}, {"error", false, false}, {"loud", false, true},
	} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, tc.level)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
				t.Errorf("%q: error %v, want one naming the levels", tc.level, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.level, err)
		}
		log.Info("request", "request_id", "r1")
		log.Error("failed")
		if got := strings.Contains(buf.String(), `"msg":"request"`); got != tc.info ||
			log.Enabled(context.Background(), slog.LevelInfo) != tc.info {
			t.Errorf("%q: request line logged %v, want %v", tc.level, got, tc.info)
		}
		if !strings.Contains(buf.String(), `"msg":"failed"`) {
			t.Errorf("%q: errors must always be logged", tc.level)
		}
	}
}

// TestLogBuffer: through a log buffer, INFO lines wait (at most
// logFlushInterval), a WARN line goes out at once with the lines before it,
// loggers made With attributes do the same, and Stop writes what is held.
func TestLogBuffer(t *testing.T) {
	var out syncBuffer
	logs := newLogBuffer(&out)
	log, err := newLogger(logs, "")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("request", "request_id", "r1")
	if s := out.String(); s != "" {
		t.Fatalf("an INFO line was written at once: %q", s)
	}
	log.With("component", "gateway").Warn("upstream failed")
	s := out.String()
	if !strings.Contains(s, `"request_id":"r1"`) || !strings.Contains(s, `"component":"gateway"`) ||
		strings.Index(s, `"r1"`) > strings.Index(s, "upstream failed") {
		t.Fatalf("after a WARN line the log holds %q, want the INFO line, then the WARN line", s)
	}
	log.WithGroup("g").Info("second", "n", 2)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `"g":{"n":2}`) {
		if time.Now().After(deadline) {
			t.Fatalf("an INFO line was still held 10 s later: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.Error("last")
	log.Info("after the error")
	if err := logs.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "\"msg\":\"after the error\"}\n") {
		t.Fatalf("Stop did not write the held line: %q", out.String())
	}
}

// TestServerExitLogsJSON: a server process that stops on an error (a
// database behind its migrations, a spool cursor it cannot read) writes
// that error as its last log line, JSON at ERROR like every other, with
// the exit code. It was a plain-text line without a level between the
// JSON ones: a log pipeline that reads JSON dropped the one line saying
// why the process died, and an alert on level ERROR missed it (an
// observability review, `tollgate gateway` against an unmigrated database).
func TestServerExitLogsJSON(t *testing.T) {
	cause := errors.New("the database is at migration 0 and this binary needs 13: run `tollgate migrate`")
	for _, cmd := range []string{"serve", "gateway", "meter", "admin", "migrate"} {
		var stderr bytes.Buffer
		if code := serverExit(cmd, cause, &stderr); code != exitError {
			t.Errorf("%s: exit %d, want %d", cmd, code, exitError)
		}
		var line struct {
			Level, Msg string
			ExitCode   int `json:"exit_code"`
		}
		if strings.Count(stderr.String(), "\n") != 1 || json.Unmarshal(stderr.Bytes(), &line) != nil ||
			line.Level != "ERROR" || line.Msg != "tollgate "+cmd+": "+cause.Error() || line.ExitCode != exitError {
			t.Errorf("%s: stderr %q, want one JSON line at ERROR with the error and exit_code 1", cmd, stderr.String())
		}
	}
	// demo is a client of the admin API, run by hand: its error stays a
	// line of text, as the admin commands' do.
	var stderr bytes.Buffer
	serverExit("demo", cause, &stderr)
	if stderr.String() != "tollgate demo: "+cause.Error()+"\n" {
		t.Errorf("demo: stderr %q", stderr.String())
	}
}
