package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestCutOffEndsStreamsInTheirProtocol: streams still running when the
// grace period ends get an error event in their own protocol (never a
// silent end), and their upstream is read on for its usage, which the
// event records with status cut_off.
func TestCutOffEndsStreamsInTheirProtocol(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, errLine string
		header                    []string
		first                     string
	}{
		{"chat", "/v1/chat/completions",
			`{"model":"sim-pro","stream":true,"stream_options":{"include_usage":true},"max_tokens":12,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"100"}}`,
			`"code":"server_shutdown"`, nil, `"content":"tok `},
		{"Anthropic native", "/anthropic/v1/messages",
			`{"model":"claude-sim","stream":true,"max_tokens":12,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"sim_delay_ms=100"}}`,
			`"type":"error","error":{"type":"overloaded_error"`, []string{"x-api-key", testKey}, `text_delta`},
		{"Gemini native", "/gemini/v1beta/models/gemini-sim:streamGenerateContent?alt=sse",
			`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":12},"labels":{"sim_delay_ms":"100"}}`,
			`"status":"UNAVAILABLE"`, []string{"x-goog-api-key", testKey}, `tok `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t, func(c *gateway.Config) { c.ShutdownDrain = 5 * time.Second })
			resp := st.post(t, tc.path, tc.body, tc.header...)
			defer resp.Body.Close()
			ls := lines(resp.Body)
			until(t, ls, tc.first)
			if n := st.gw.CutOff(); n != 1 {
				t.Fatalf("CutOff() = %d, want 1", n)
			}
			got := until(t, ls, tc.errLine)
			if tc.name == "chat" {
				until(t, ls, "[DONE]")
			}
			for _, l := range got {
				if strings.Contains(l, `"prompt_tokens"`) {
					t.Fatalf("a cut-off stream sent its usage: %s", l)
				}
			}
			// The upstream is read on to its end: the usage is the provider's.
			e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
			if e.Status != usage.StatusCutOff || e.UsageSource != usage.SourceUpstream || e.Usage.CompletionTokens != 12 {
				t.Fatalf("event %+v, want cut_off with the provider's 12 completion tokens", e)
			}
		})
	}
}

// TestStopCutsOffAfterGrace: Stop lets a short request finish, cuts off a
// long one when its grace period ends, and returns with both events made.
func TestStopCutsOffAfterGrace(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) { c.ShutdownDrain = 300 * time.Millisecond })
	long := st.post(t, "/v1/chat/completions",
		`{"model":"sim-small","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"200"}}`)
	defer long.Body.Close()
	ls := lines(long.Body)
	until(t, ls, `"content":"tok `)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := st.gw.Stop(ctx); err == nil {
		t.Fatal("Stop = nil, want the grace period's end")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Stop took %v", took)
	}
	until(t, ls, `"code":"server_shutdown"`)
	e := st.sink.event(t, long.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusCutOff || e.Usage.CompletionTokens == 0 {
		t.Fatalf("event %+v, want cut_off with what was produced", e)
	}
	if err := st.gw.Stop(context.Background()); err == nil { // idempotent
		t.Fatal("a second Stop forgot the first's result")
	}
}

// TestReadTimeoutBoundsOnlyTheRequest: a client that sends its request too
// slowly is cut off, but a response that streams longer than ReadTimeout
// is not.
func TestReadTimeoutBoundsOnlyTheRequest(t *testing.T) {
	st := newStack(t, func(c *gateway.Config) { c.ReadTimeout = 300 * time.Millisecond })
	resp := st.post(t, "/v1/chat/completions",
		`{"model":"sim-small","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"100"}}`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("a 900 ms stream under a 300 ms ReadTimeout: %v\n%s", err, b)
	}
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Status != usage.StatusOK {
		t.Fatalf("event %+v, want ok", e)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(st.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testKey +
		"\r\nContent-Length: 1000\r\n\r\n{"))
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	reply, _ := io.ReadAll(conn) // the server gives up on the body and closes
	if time.Since(start) > 3*time.Second {
		t.Fatalf("a stalled request body held the connection %v (reply %q)", time.Since(start), reply)
	}
}

// TestEveryResponseHasRequestID: refusals too carry X-Request-Id, and the
// native routes refuse in their own envelope.
func TestEveryResponseHasRequestID(t *testing.T) {
	st := newStack(t, nil)
	for _, tc := range []struct {
		path, body string
		header     []string
		status     int
		shape      string
	}{
		{"/v1/chat/completions", `{}`, []string{"Authorization", "Bearer wrong"}, 401, `"code":"invalid_api_key"`},
		{"/v1/chat/completions", `{}`, []string{"X-None", "x"}, 401, `"type":"invalid_request_error"`},
		{"/anthropic/v1/messages", `{}`, []string{"x-api-key", "wrong"}, 401, `{"type":"error","error":{"type":"authentication_error"`},
		{"/gemini/v1beta/models/gemini-sim:generateContent", `{}`, []string{"x-goog-api-key", "wrong"}, 401, `"status":"UNAUTHENTICATED"`},
		{"/v1/nope", `{}`, nil, 404, `"code":"not_found"`},
		{"/v1/chat/completions", `{"model":1}`, nil, 400, `"code":"invalid_request"`},
	} {
		resp := st.post(t, tc.path, tc.body, tc.header...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("X-Request-Id") == "" || !strings.Contains(string(b), tc.shape) {
			t.Errorf("%s: %d, X-Request-Id %q, %s; want %d and %s", tc.path, resp.StatusCode, resp.Header.Get("X-Request-Id"), b, tc.status, tc.shape)
		}
		if !json.Valid(b) {
			t.Errorf("%s: not JSON: %s", tc.path, b)
		}
	}
}

// TestStopWaitsForItsGoroutines: when Stop returns, no goroutine the
// server started is left: not those serving its listeners, not its
// background work (the team's rule: a component's stop waits for what it
// started).
func TestStopWaitsForItsGoroutines(t *testing.T) {
	st := newStack(t, nil)
	resp := st.post(t, "/v1/chat/completions", `{"model":"sim-small","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := st.gw.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	buf := make([]byte, 1<<20)
	dump := string(buf[:runtime.Stack(buf, true)])
	for g := range strings.SplitSeq(dump, "\n\n") {
		if strings.Contains(g, "gateway.(*Server).Start") {
			t.Fatalf("a goroutine the server started outlived Stop:\n%s", g)
		}
	}
}
