package gateway_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestResponsesUsageInProgressIsNotTheFinalReport: a Responses API stream
// whose response.created and response.in_progress carry a usage object
// (the prompt counted, no output yet: a compatible server that fills in
// every response object's usage) has its final report in
// response.completed. A report on a response still in progress is not
// final: taken as final, the relay treated the answer's deltas as output
// after the final report, broke the stream off at the first one, and
// billed the prompt-only report as the provider's figure. The client gets
// every delta and the end, and the event bills response.completed's
// figures.
func TestResponsesUsageInProgressIsNotTheFinalReport(t *testing.T) {
	progress := func(typ string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"model\":\"m\"," +
			"\"usage\":{\"input_tokens\":9,\"output_tokens\":0,\"total_tokens\":9}}}\n\n"
	}
	words := []string{"The ", "answer ", "comes ", "in ", "several ", "deltas."}
	body := progress("response.created") + progress("response.in_progress")
	for _, w := range words {
		body += "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"" + w + "\"}\n\n"
	}
	body += "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"model\":\"m\"," +
		"\"usage\":{\"input_tokens\":9,\"output_tokens\":31,\"total_tokens\":40,\"output_tokens_details\":{\"reasoning_tokens\":20}}}}\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	for _, w := range words {
		if !strings.Contains(got, `"delta":"`+w+`"`) {
			t.Fatalf("the client did not get the delta %q:\n%s", w, got)
		}
	}
	if !strings.Contains(got, "response.completed") {
		t.Fatalf("the client did not get response.completed:\n%s", got)
	}
	want := usage.Tokens{PromptTokens: 9, CompletionTokens: 31, ReasoningTokens: 20}
	if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Usage != want {
		t.Fatalf("event %s %s %+v (%s), want ok with response.completed's figures %+v", e.Status, e.UsageSource, e.Usage, e.Error, want)
	}
}
