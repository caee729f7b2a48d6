package gateway_test

import (
	"strings"
	"testing"
)

// TestChatRouteBillsALoweredAnthropicReport: Anthropic's message_delta usage
// is cumulative (DESIGN: it overrides message_start; counts never fall). An
// upstream that sends a second message_delta with a lower output_tokens
// (50, then 5) is billed 50 on /anthropic/v1/messages
// (TestALoweredReportIsNotBilledBelowWhatTheClientRead) but 5 on
// /v1/chat/completions translated from the same bytes: the chat route
// replaces the report with the lowered one and loses 45 billed tokens. The
// same upstream answer must bill the same whichever route served it.
func TestChatRouteBillsALoweredAnthropicReport(t *testing.T) {
	body := anthText + anthDeltaN(50) + anthDeltaN(5) + anthEv("message_stop", `{"type":"message_stop"}`)
	st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/v1/chat/completions",
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if e.Usage.CompletionTokens < 50 {
		t.Errorf("event %s %s %+v, want the 50 output tokens of the higher cumulative report billed; the client got\n%s",
			e.Status, e.UsageSource, e.Usage, strings.TrimSpace(got))
	}
}
