package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
)

// A token count was bounded by connect_timeout for its whole answer: a
// count's headers come with its whole answer (the provider counts first),
// so a count of a big prompt that took longer than connect_timeout got
// 504, and so did one whose body came slowly. A non-streamed request
// waits stall_timeout for such headers when it is longer, reads its body
// under stall_timeout, and all of it under request_timeout.

// TestTokenCountingBoundedAsANonStreamedRequest: with connect_timeout
// 300ms and stall_timeout 600ms (countStack), a count answered after
// 450ms, or whose body comes over 450ms, is served; one whose headers or
// body never come gets 504 at stall_timeout, and one that trickles on,
// 504 at request_timeout. Each names the bound it ran into.
func TestTokenCountingBoundedAsANonStreamedRequest(t *testing.T) {
	trickle := func(w http.ResponseWriter, r *http.Request, pieces ...string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for i := 0; ; i++ {
			if i < len(pieces) {
				_, _ = io.WriteString(w, pieces[i])
			} else if len(pieces) == 0 {
				_, _ = io.WriteString(w, " ") // on and on: JSON's blanks
			} else {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(150 * time.Millisecond):
			}
		}
	}
	for _, c := range []struct {
		name           string
		answer         func(w http.ResponseWriter, r *http.Request)
		requestTimeout time.Duration
		status         int
		says           string
	}{
		{"headers after connect_timeout, within stall_timeout", func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(450 * time.Millisecond)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"input_tokens":5}`)
		}, 0, http.StatusOK, `"input_tokens":5`},
		{"a body slower than connect_timeout, never silent for stall_timeout", func(w http.ResponseWriter, r *http.Request) {
			trickle(w, r, `{"input_`, `tokens"`, `:5`, `}`)
		}, 0, http.StatusOK, `"input_tokens":5`},
		{"no headers within stall_timeout", func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, 0, http.StatusGatewayTimeout, "did not answer within stall_timeout"},
		{"a body silent for stall_timeout", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"input_`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, 0, http.StatusGatewayTimeout, "sent nothing within stall_timeout"},
		{"a body trickling past request_timeout", func(w http.ResponseWriter, r *http.Request) {
			trickle(w, r)
		}, 900 * time.Millisecond, http.StatusGatewayTimeout, "request_timeout"},
		{"no headers within request_timeout", func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, 400 * time.Millisecond, http.StatusGatewayTimeout, "request_timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := countStackOn(t, false, func(w http.ResponseWriter, r *http.Request, _ int64) { c.answer(w, r) },
				func(cfg *gateway.Config) {
					cfg.Retry.MaxAttempts = 1
					for i := range cfg.Providers {
						if strings.HasPrefix(cfg.Providers[i].Name, "bad-") {
							cfg.Providers[i].RequestTimeout = c.requestTimeout
						}
					}
				})
			begun := time.Now()
			code, body, _ := st.send(t, anthropicCount)
			if code != c.status || !strings.Contains(body, c.says) {
				t.Fatalf("client got %d %s after %v, want %d saying %q", code, body, time.Since(begun), c.status, c.says)
			}
		})
	}
}
