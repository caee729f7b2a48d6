package anthropic

import (
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A stream cut by an error after the model streamed its thinking bills
// that thinking as reasoning: the estimate of the output may not report
// reasoning_tokens 0 when all the output was thinking.
func TestThinkingBeforeAnErrorIsBilledAsReasoning(t *testing.T) {
	events := stream(
		`message_start: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"output_tokens":1}}}`,
		`content_block_start: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`content_block_delta: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants the weather in Oslo, so I should call the weather tool first."}}`,
		`error: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	)
	r := tapped(events)
	u, src := r.Resolve(estimator(t), tap.Text(""))
	if src != usage.SourcePartial || u.PromptTokens != 10 || u.CompletionTokens <= 1 {
		t.Fatalf("usage %+v (%s), want prompt 10 and the thinking estimated, partial", u, src)
	}
	if u.ReasoningTokens != u.CompletionTokens {
		t.Errorf("reasoning_tokens %d of %d completion tokens, all of them thinking", u.ReasoningTokens, u.CompletionTokens)
	}
}

// A whole response's top-level figures bound the sums of its
// usage.iterations[] from below, as a stream's message_delta's do: an
// iteration of {} or null counts nothing, and the bill is not less than
// the top level says.
func TestBodyIterationsSumIsNotBelowTheTopLevel(t *testing.T) {
	var r tap.Report
	body := `{"type":"message","usage":{"input_tokens":5,"cache_read_input_tokens":4,"output_tokens":9,"iterations":[{},null]}}`
	if err := BodyUsage([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	want := usage.Tokens{PromptTokens: 9, CachedTokens: 4, CompletionTokens: 9}
	if r.Usage != want || !r.Reported || !r.Final {
		t.Errorf("usage %+v (reported %v, final %v), want %+v, final", r.Usage, r.Reported, r.Final, want)
	}
}

// A usage that is not an object is no report, in a whole response and in
// message_start: taken as one, it billed zero tokens as the provider's.
func TestUsageNotAnObjectIsNoReport(t *testing.T) {
	var r tap.Report
	if err := BodyUsage([]byte(`{"type":"message","usage":"150","content":[{"type":"text","text":"hi"}]}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Reported || r.Final {
		t.Errorf("body: reported %v, final %v (usage %+v), want neither", r.Reported, r.Final, r.Usage)
	}
	if r := tapped(stream(`message_start: {"type":"message_start","message":{"model":"claude-x","usage":"150"}}`)); r.Reported {
		t.Errorf("message_start: reported %+v", r.Usage)
	}
}

// message_start opens the count once: another one later (after a
// message_delta gave the final figures) does not lower them.
func TestLaterMessageStartDoesNotResetTheCount(t *testing.T) {
	events := stream(
		`message_start: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"output_tokens":1}}}`,
		`message_delta: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":50}}`,
		`message_start: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}`,
	)
	r := tapped(events)
	if want := (usage.Tokens{PromptTokens: 10, CompletionTokens: 50}); r.Usage != want || !r.Final {
		t.Errorf("usage %+v (final %v), want %+v, final", r.Usage, r.Final, want)
	}
}

// An error after message_start and before any output (Anthropic's usual
// overloaded_error) is a refusal, which bills nothing: not message_start's
// opening figures.
func TestErrorBeforeAnyOutputBillsNothing(t *testing.T) {
	events := stream(
		`message_start: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":17,"cache_read_input_tokens":5,"output_tokens":1}}}`,
		`error: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	)
	r := tapped(events)
	u, src := r.Resolve(estimator(t), tap.Text("Hi"))
	if r.Reported || u != (usage.Tokens{}) || r.Error != "overloaded_error: Overloaded" {
		t.Errorf("usage %+v (%s, reported %v, error %q), want nothing billed for the refusal", u, src, r.Reported, r.Error)
	}
}
