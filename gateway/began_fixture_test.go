package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A code review: the recorded Responses API stream error-then-response-failed.sse
// (response.created, response.in_progress, error insufficient_quota,
// response.failed with usage null) bills nothing: expected.json says
// "nothing billable streamed", and OpenAI refused the request for want of
// quota: an error frame before any output is a refusal, whatever events came before it.
func TestResponsesRefusedAfterItsCreatedEventBillsNothing(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixtureDir(t), "openai-responses", "error-then-response-failed.sse"))
	if err != nil {
		t.Fatal(err)
	}
	st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", string(b)).URL)
	prompt := strings.Repeat("count these words please ", 40)
	e, _ := doRequest(t, st, "/v1/responses", `{"model":"m","stream":true,"input":"`+prompt+`"}`)
	if e.Usage.PromptTokens != 0 || e.Usage.CompletionTokens != 0 {
		t.Fatalf("a response refused for insufficient_quota billed %+v (%s, %s); want nothing", e.Usage, e.UsageSource, e.Status)
	}
}
