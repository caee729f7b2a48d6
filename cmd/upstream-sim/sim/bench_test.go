package sim_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// discardWriter is a flushable http.ResponseWriter that keeps nothing.
type discardWriter struct {
	h http.Header
	n int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}

// BenchmarkStream measures the handler alone: one streamed request of 64
// tokens with include_usage, per op.
func BenchmarkStream(b *testing.B) {
	s := sim.New()
	body := chatBody("sim-pro", true, true, `,"max_tokens":64`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		w := &discardWriter{h: http.Header{}}
		s.ServeHTTP(w, req)
		if w.n == 0 {
			b.Fatal("no output")
		}
	}
}
