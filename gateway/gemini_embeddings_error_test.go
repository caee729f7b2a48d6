package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A Gemini embeddings answer that is an error object under a 200 was read
// as an answer that "holds no embedding": whatever the error said, the
// deployment failed over and rested (a client's INVALID_ARGUMENT too, so a
// client sending bad input rested the model's deployment for everyone),
// the client got a 502 without the provider's words, and the request was
// charged its prompt, estimated, though the provider refused it. As on
// every other route (docs/configuration.md, README "What gets recorded"):
// a client's error rests nothing and is the client's answer; an error
// under a 200 bills nothing.
func TestGeminiEmbeddingsErrorUnderA200(t *testing.T) {
	embed := errorUnder200Request{"/v1/embeddings", `{"model":"gemini-flaky","input":"hi there, a longer input of some words"}`, nil}
	t.Run("the client's error", func(t *testing.T) {
		st, hits := flakyStack(t, jsonOf(`{"error":{"code":400,"message":"bad role","status":"INVALID_ARGUMENT"}}`), nil)
		for i := range 2 {
			status, body, id := st.send(t, embed)
			if status == http.StatusOK || !strings.Contains(body, "bad role") {
				t.Errorf("request %d: client got %d %s, want the provider's error", i, status, body)
			}
			e := st.sink.event(t, id)
			if evs := st.sink.eventsOf(id); len(evs) != 1 || e.Status != usage.StatusUpstreamError || e.Attempt != 1 || e.NotCharged || e.Usage.Total() != 0 {
				t.Errorf("request %d: events %+v, want one attempt's upstream_error, nothing billed", i, evs)
			}
		}
		if n := hits.Load(); n != 2 {
			t.Errorf("the upstream got %d requests, want 2: a client's error does not rest its deployment", n)
		}
	})
	t.Run("the provider's error, last attempt", func(t *testing.T) {
		st, _ := flakyStack(t, jsonOf(`{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`),
			func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
		status, body, id := st.send(t, embed)
		if status != http.StatusBadGateway || !strings.Contains(body, "overloaded") {
			t.Errorf("client got %d %s, want 502 with the provider's error", status, body)
		}
		if e := st.sink.event(t, id); e.Status != usage.StatusUpstreamError || e.Usage.Total() != 0 {
			t.Errorf("event %+v, want upstream_error, nothing billed", e)
		}
	})
}
