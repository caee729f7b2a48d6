package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A deployment whose streams fail after the client's first byte (its
// connection broken mid-answer, Anthropic's overloaded_error after
// output began, a stall after a keep-alive comment) cannot be failed
// over for that request, but it failed: it must rest as a deployment
// that failed before its first byte does. It used to be left as it was
// (neither succeeded nor failed), so such a deployment kept its full
// share of the traffic for ever: 3 of every 4 streams of a model whose
// deployment of weight 3 breaks every answer failed, however long it
// lasted. An error of the client's side in the stream (a content filter)
// is not the deployment's failure, and rests nothing.
func TestAStreamThatFailsAfterItsFirstByteRestsItsDeployment(t *testing.T) {
	const (
		roleChunk    = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
		contentChunk = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello there"},"finish_reason":null}]}`
		messageStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}" +
			"\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}" // output began: sent
	)
	for _, c := range []struct {
		name, typ string
		serve     func(w http.ResponseWriter)
		rests     bool
		native    bool // on /anthropic/v1/messages, not /v1/chat/completions
	}{
		{"connection broken after output", "openai", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, roleChunk+"\n\n"+contentChunk+"\n\n")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, true, false},
		{"server error frame after output", "openai", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, roleChunk+"\n\n"+contentChunk+"\n\n"+
				`data: {"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`+"\n\n")
		}, true, false},
		{"anthropic overloaded after output", "anthropic", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, messageStart+"\n\n"+
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
		}, true, false},
		{"anthropic overloaded after output, native route", "anthropic", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, messageStart+"\n\n"+
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
		}, true, true},
		{"native stream broken after output", "anthropic", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, messageStart+"\n\n")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, true, true},
		{"stall after a keep-alive comment", "openai", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, ": keep-alive\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(time.Second)
		}, true, false},
		{"client's error frame after output (not the deployment's)", "openai", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, roleChunk+"\n\n"+contentChunk+"\n\n"+
				`data: {"error":{"message":"flagged","type":"invalid_request_error","param":null,"code":"content_filter"}}`+"\n\n")
		}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hits atomic.Int64
			bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				c.serve(w)
			}))
			t.Cleanup(bad.Close)
			st := newStack(t, func(cfg *gateway.Config) {
				goodProvider := cfg.Providers[0].Name
				if c.native {
					goodProvider = "sim-anthropic" // a deployment of the route's own type
				}
				cfg.Providers = append(cfg.Providers, gateway.ProviderConfig{Name: "bad", Type: c.typ, BaseURL: bad.URL + "/v1",
					StallTimeout: 200 * time.Millisecond})
				cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "mid", Deployments: []gateway.DeploymentConfig{
					{Name: "bad", Provider: "bad", UpstreamModel: "m", Weight: 3},
					{Name: "good", Provider: goodProvider, UpstreamModel: "sim-small", Weight: 1}}})
				cfg.Retry.Cooldown = time.Hour
			})
			const n = 20
			for range n {
				var resp *http.Response
				if c.native {
					resp = st.post(t, "/anthropic/v1/messages", `{"model":"mid","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi there"}]}`,
						"x-api-key", testKey)
				} else {
					resp = st.post(t, "/v1/chat/completions", `{"model":"mid","stream":true,"messages":[{"role":"user","content":"hi there"}]}`)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				id := resp.Header.Get("X-Request-Id")
				if e := st.sink.event(t, id); e.Deployment == "bad" && (e.Status == usage.StatusOK || e.NotCharged || len(st.sink.eventsOf(id)) != 1) {
					t.Fatalf("the failed stream's event %+v (after the first byte: no other attempt, charged)", e)
				}
			}
			got := hits.Load()
			switch {
			case c.rests && got != 1:
				t.Errorf("the deployment that failed after the first byte got %d of %d streams, want 1 (it rests an hour after it)", got, n)
			case !c.rests && got < 3:
				t.Errorf("the deployment whose streams ended in the client's error got %d of %d streams: it was rested by the client's error", got, n)
			}
		})
	}
}
