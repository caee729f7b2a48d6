package gateway_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestNativeAnswerShowsCorrectedUsage: a native answer whose usage the
// gateway corrected before billing it (here a Responses answer counting 50
// cached input tokens of 10: cache_over_prompt, billed 10 cached) tells
// the client the usage billed, as a chat answer, a chat stream's usage
// chunk and an embeddings answer do (reportedAsBilled). The native routes
// rewrote only an estimate's, and the client read 50 cached tokens, more
// than its whole input, while the ledger billed 10.
func TestNativeAnswerShowsCorrectedUsage(t *testing.T) {
	u := `"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":50},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}`
	resp := `{"id":"r","object":"response","status":"completed","model":"m","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi there friend"}]}],` + u + `}`
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"model\":\"m\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi there friend\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + resp + "}\n\n"
	for _, c := range []struct {
		name, ct, body, req string
	}{
		{"non-streamed", "application/json", resp, `{"model":"m","input":"hi"}`},
		{"streamed", "text/event-stream", stream, `{"model":"m","stream":true,"input":"hi"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := jsonUpstream(t, c.ct, c.body)
			e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", c.req)
			if !usage.HasCorrection(e.Corrections, usage.CorrectionCacheOverPrompt) || e.Usage.CachedTokens != 10 {
				t.Fatalf("event %+v corrections %q: want 10 cached tokens billed, corrected", e.Usage, e.Corrections)
			}
			if strings.Contains(got, `"cached_tokens":50`) || !strings.Contains(got, `"cached_tokens":10`) {
				t.Errorf("the client was told the upstream's 50 cached tokens, the ledger billed 10:\n%s", got)
			}
			if n := strings.Count(got, `"type":"response.completed"`); c.name == "streamed" && n != 1 {
				t.Errorf("%d response.completed events, want 1:\n%s", n, got)
			}
		})
	}
}
