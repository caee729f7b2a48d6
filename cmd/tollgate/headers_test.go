package main

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestResponseHeadersWrittenAside covers the gateway's headerFlusher, which
// writes a response's header from a goroutine of its own: the header that
// goes out with a first write larger than net/http's 2 KiB buffer (a long
// non-streamed completion) and with a stream's first flush keeps the
// handler's Content-Type and X-Request-Id, the body arrives whole, and the
// usage is metered.
func TestResponseHeadersWrittenAside(t *testing.T) {
	s := newStack(t, nil)

	resp := s.post("/v1/chat/completions", `{"model":"sim-small","max_tokens":1500,"messages":[{"role":"user","content":"write at length"}]}`)
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || len(body) <= 2048 {
		t.Fatalf("status %d, content type %q, %d bytes, err %v", resp.StatusCode, resp.Header.Get("Content-Type"), len(body), err)
	}
	var c struct {
		Usage struct {
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil || c.Usage.CompletionTokens != 1500 {
		t.Fatalf("body does not parse as the completion (%v): %.200s…", err, body)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusOK || e.HTTPStatus != 200 || e.Usage.CompletionTokens != 1500 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event = %+v", e)
	}

	resp = s.post("/v1/chat/completions", `{"model":"sim-small","stream":true,"stream_options":{"include_usage":true},"max_tokens":300,"messages":[{"role":"user","content":"count"}]}`)
	body, err = io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q, err %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if n := strings.Count(string(body), "data: "); n != 1+300+1+1+1 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("%d data frames, want role, 300 tokens, finish, usage, [DONE]: %.300s…", n, body)
	}
	e = s.event(resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusOK || e.Usage.CompletionTokens != 300 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event = %+v", e)
	}
}

// TestStreamFirstEventFlushedAtOnce: the flush that sends a stream's header
// (made aside) sends its first event too, before the upstream's next one.
func TestStreamFirstEventFlushedAtOnce(t *testing.T) {
	s := newStack(t, nil)
	start := time.Now()
	resp := s.post("/v1/chat/completions", chatBody(1, true, `"sim_delay_ms":"3000"`))
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("status %d, X-Request-Id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if took := time.Since(start); err != nil || !strings.HasPrefix(line, "data: ") || took > 2*time.Second {
		t.Fatalf("first line %q (err %v) after %v; want the opening frame before the upstream's 3 s pause ends", line, err, took)
	}
}
