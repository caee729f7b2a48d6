package gateway_test

import (
	"testing"
)

// TestAnEmptyLaterReportDropsTheBilledUsage: an OpenAI-compatible upstream
// that reports its usage on the finish chunk (500 completion tokens, most
// of them reasoning it never streamed) and then sends a usage chunk that
// counts nothing (`"usage":{}`, or every count 0, as some proxies append)
// is billed the tokenizer's count of the two streamed words: the empty
// report replaced the real one ("the last report winning"), and the floor
// for a report that counts no output then estimates from the text. The
// provider billed 500; 498 tokens are lost. A report that counts nothing
// cannot be the bill when an earlier report of the same stream counted
// more: the earlier one should stand (as a lowered Anthropic report does
// on the native route).
func TestAnEmptyLaterReportDropsTheBilledUsage(t *testing.T) {
	finish := chatEvent(`{"index":0,"delta":{"content":"world"},"finish_reason":"stop"}`)
	finish = finish[:len(finish)-3] + `,"usage":{"prompt_tokens":10,"completion_tokens":500,"total_tokens":510}}` + "\n\n"
	for _, later := range []string{`{}`, `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`} {
		body := chatEvent(`{"index":0,"delta":{"content":"hello "}}`) + finish +
			`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":` + later + "}\n\ndata: [DONE]\n\n"
		st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", body).URL)
		e, _ := doRequest(t, st, "/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		if e.Usage.CompletionTokens < 500 || e.Usage.PromptTokens != 10 {
			t.Errorf("later usage %s: event %s %s %+v, want the finish chunk's 10 prompt and 500 completion tokens billed",
				later, e.Status, e.UsageSource, e.Usage)
		}
	}
}
