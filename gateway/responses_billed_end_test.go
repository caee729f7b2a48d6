package gateway_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestResponsesStreamPartialUsageEndsOnce: a streamed Responses answer
// whose response.completed reports usage the gateway must complete (output
// streamed, "output_tokens":0: billed partly estimated) ends with one
// response.completed, telling what was billed. The relay held the event as
// the final report, sent it, and then sent it again with the usage billed:
// the SDK read two completed responses.
func TestResponsesStreamPartialUsageEndsOnce(t *testing.T) {
	text := "The quick brown fox jumps over the lazy dog, and then it runs far away into the woods."
	body := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"model\":\"m\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"" + text + "\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"model\":\"m\",\"output\":[]," +
		"\"usage\":{\"input_tokens\":5,\"output_tokens\":0,\"total_tokens\":5}}}\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	if e.UsageSource != usage.SourcePartial || e.Usage.CompletionTokens == 0 {
		t.Fatalf("billed %+v (%s), want the output estimated (partial)", e.Usage, e.UsageSource)
	}
	if n := strings.Count(got, "data: {\"type\":\"response.completed\""); n != 1 {
		t.Fatalf("the client got %d response.completed events, want 1:\n%s", n, got)
	}
	if want := `"output_tokens":` + itoa(int(e.Usage.CompletionTokens)); !strings.Contains(got, want) {
		t.Errorf("the completed response does not tell the %d output tokens billed:\n%s", e.Usage.CompletionTokens, got)
	}
}
