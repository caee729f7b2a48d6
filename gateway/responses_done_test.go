package gateway_test

import (
	"strings"
	"testing"
)

// TestResponsesTextOutsideDeltasIsCounted: a streamed Responses API answer
// that carries no usage and gives its text only in the .done events and
// in response.completed's output (a compatible server that sends no .delta
// events) was billed 0 completion tokens: the stream's tap counted .delta
// events alone, while the same answer not streamed counts its output
// items (a review). The final response's output items are counted when no
// delta carried any text.
func TestResponsesTextOutsideDeltasIsCounted(t *testing.T) {
	text := "Hello there friend, this is a fairly long answer that the client reads in full from the done events and the completed response object."
	item := `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + text + `"}]}`
	body := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"model\":\"m\"}}\n\n" +
		"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"output_index\":0,\"content_index\":0,\"text\":\"" + text + "\"}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":" + item + "}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"model\":\"m\",\"output\":[" + item + "]}}\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	if !strings.Contains(got, text) {
		t.Fatalf("the client did not get the text:\n%s", got)
	}
	if e.Usage.CompletionTokens < 20 {
		t.Errorf("billed %+v (%s): the %d-byte answer the client read is billed %d completion tokens", e.Usage, e.UsageSource, len(text), e.Usage.CompletionTokens)
	}
	// With deltas, the text is counted once, from them.
	delta := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"" + text + "\"}\n\n"
	up = jsonUpstream(t, "text/event-stream", strings.Replace(body, "event: response.output_text.done", delta+"event: response.output_text.done", 1))
	once, _ := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	if once.Usage.CompletionTokens != e.Usage.CompletionTokens {
		t.Errorf("with deltas billed %d completion tokens, without %d: want the text counted once either way", once.Usage.CompletionTokens, e.Usage.CompletionTokens)
	}
}
