package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger"
)

// FuzzEventPath drives arbitrary strings and counts, as a hostile upstream
// would send them, through the whole event path: the gateway's usage tap,
// the event it makes, the durable publisher, JetStream, the meter worker
// and the ledger's write. Whatever the upstream sends, the request's event
// ends in the ledger or in the dead-letter stream, and it never keeps the
// next request's event from the ledger.
func FuzzEventPath(f *testing.F) {
	f.Add("gpt-4o", "", int64(12), int64(6), int64(0), int64(24), int64(12))
	f.Add("sim/x\x00y", "boom\x00", int64(10), int64(1_000_000), int64(0), int64(-4), int64(9))
	f.Add("\xff\xfe", "\xc3", int64(-1<<62), int64(1<<62), int64(1<<62), int64(1<<62), int64(-1))
	f.Add(strings.Repeat("é", 1<<17), strings.Repeat("e", 5000), int64(1<<40), int64(0), int64(0), int64(1<<40), int64(1<<41))
	f.Add(`"},"usage":{"prompt_tokens":99`, `\"`, int64(0), int64(0), int64(0), int64(0), int64(0))

	var mu sync.Mutex
	var stream []byte // what the hostile upstream answers next
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		b := stream
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(b)
	}))
	f.Cleanup(up.Close)
	s := newStack(f, func(c *fileConfig) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "hostile", Type: "openai", BaseURL: up.URL, PrefixRoutes: gateway.PrefixAll})
		c.Meter.BatchWait = time.Millisecond
	})
	f.Fuzz(func(t *testing.T, served, errText string, prompt, cached, write, completion, reasoning int64) {
		mu.Lock()
		stream = hostileStream(served, errText, prompt, cached, write, completion, reasoning)
		mu.Unlock()
		id := chatStreamID(t, s, "hostile/m")
		next := chatStreamID(t, s, "sim-small") // the request after it
		ctx := context.Background()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			_, err := s.store.Event(ctx, id)
			stored := err == nil
			dead := false
			if !stored {
				letters, _ := s.app.dlq.List(ctx, 0, 1000)
				for _, l := range letters {
					dead = dead || l.EventID == id && l.Reason != ""
				}
			}
			_, nextErr := s.store.Event(ctx, next)
			if (stored || dead) && nextErr == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 20s: event %s stored %v, dead-lettered %v; the next request's event: %v", id, stored, dead, nextErr)
			}
			if err != nil && ledger.ErrorCode(err) != ledger.ENotFound {
				t.Fatal(err)
			}
		}
	})
}

// hostileStream is an OpenAI chat stream whose served model, error text
// and usage figures are the given ones, strings written raw between the
// quotes (quotes and backslashes escaped, control bytes and invalid UTF-8
// left as they are, as a broken upstream would).
func hostileStream(served, errText string, prompt, cached, write, completion, reasoning int64) []byte {
	raw := func(s string) string {
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`).Replace(s) + `"`
	}
	var b strings.Builder
	fmt.Fprintf(&b, "data: {\"id\":\"c\",\"model\":%s,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n", raw(served))
	if errText != "" {
		fmt.Fprintf(&b, "data: {\"error\":{\"message\":%s,\"type\":\"server_error\"}}\n\n", raw(errText))
	}
	fmt.Fprintf(&b, "data: {\"id\":\"c\",\"model\":%s,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"+
		"\"prompt_tokens_details\":{\"cached_tokens\":%d,\"cache_write_tokens\":%d},\"completion_tokens_details\":{\"reasoning_tokens\":%d}}}\n\n",
		raw(served), prompt, completion, cached, write, reasoning)
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// chatStreamID sends a streamed chat completion for model with the
// stack's key, reads it to its end and returns its X-Request-Id.
func chatStreamID(t *testing.T, s *stack, model string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.gateway+"/v1/chat/completions", strings.NewReader(
		`{"model":`+strconv.Quote(model)+`,"stream":true,"stream_options":{"include_usage":true},"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+s.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	id := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("%s: status %d, X-Request-Id %q", model, resp.StatusCode, id)
	}
	return id
}
