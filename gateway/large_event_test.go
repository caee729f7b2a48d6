package gateway_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestLargeStreamEventIsRelayedAndBilled: an image generated in a stream
// comes in one event, whole: Gemini's inlineData part with the chunk's
// usageMetadata, the Responses API's response.completed repeating every
// image_generation_call's result beside the usage. A 4K PNG is some
// 20 MiB of base64. The SSE relay refused any event over 8 MiB ("sse:
// event too large"): the client got a broken stream (Gemini: a 502 and
// nothing) and the ledger billed an estimate of 0 output tokens, while
// the provider billed the usage in that very event. The same answer
// not streamed is read up to 64 MiB and billed as reported: a stream's
// event is bounded as a whole answer is.
func TestLargeStreamEventIsRelayedAndBilled(t *testing.T) {
	image := strings.Repeat("iVBORw0KGgo", (12<<20)/11) // 12 MiB of base64
	for _, c := range []struct {
		name, typ, path, body, upstream string
		want                            usage.Tokens
	}{{
		name: "gemini inlineData", typ: "gemini", path: "/gemini/v1beta/models/m:streamGenerateContent?alt=sse",
		body: `{"contents":[{"role":"user","parts":[{"text":"draw a cat in 4K"}]}]}`,
		upstream: `data: {"candidates":[{"content":{"role":"model","parts":[{"inlineData":{"mimeType":"image/png","data":"` + image + `"}}]},"finishReason":"STOP","index":0}],` +
			`"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2000,"totalTokenCount":2008},"modelVersion":"m"}` + "\r\n\r\n",
		want: usage.Tokens{PromptTokens: 8, CompletionTokens: 2000},
	}, {
		name: "responses image_generation_call", typ: "openai", path: "/v1/responses",
		body: `{"model":"m","stream":true,"input":"draw a cat","tools":[{"type":"image_generation"}]}`,
		upstream: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"model\":\"m\",\"output\":[]}}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"model\":\"m\"," +
			"\"output\":[{\"type\":\"image_generation_call\",\"id\":\"ig\",\"status\":\"completed\",\"result\":\"" + image + "\"}]," +
			"\"usage\":{\"input_tokens\":2000,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":100,\"output_tokens_details\":{\"reasoning_tokens\":64},\"total_tokens\":2100}}}\n\n",
		want: usage.Tokens{PromptTokens: 2000, CompletionTokens: 100, ReasoningTokens: 64},
	}} {
		t.Run(c.name, func(t *testing.T) {
			up := jsonUpstream(t, "text/event-stream", c.upstream)
			e, got := doRequest(t, oneProviderStack(t, c.typ, up.URL), c.path, c.body)
			if !strings.Contains(got, image) {
				t.Errorf("the client read %d bytes, not the %d-byte image", len(got), len(image))
			}
			if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Usage != c.want {
				t.Fatalf("event %s (%s), %s usage %+v; want ok and the upstream's %+v", e.Status, e.Error, e.UsageSource, e.Usage, c.want)
			}
		})
	}
}
