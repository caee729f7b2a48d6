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

// BenchmarkStream measures the handler alone: one streamed request per op,
// per protocol: 64 tokens (OpenAI with include_usage, Gemini with thoughts),
// 15 for Anthropic, whose completions stop at 16.
func BenchmarkStream(b *testing.B) {
	for _, bc := range []struct{ name, path, body string }{
		{"openai", "/v1/chat/completions", chatBody("sim-pro", true, true, `,"max_tokens":64`)},
		{"anthropic", "/v1/messages", anthBody("sim-pro", true, 15, `,"metadata":{"user_id":"sim_chunks=64"}`)},
		{"gemini", gemPath("sim-pro"), gemBody(64, true, "")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := sim.New()
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, bc.path, strings.NewReader(bc.body))
				w := &discardWriter{h: http.Header{}}
				s.ServeHTTP(w, req)
				if w.n == 0 {
					b.Fatal("no output")
				}
			}
		})
	}
}
