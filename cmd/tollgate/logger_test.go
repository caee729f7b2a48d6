package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
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
