package main

import (
	"bytes"
	"context"
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
