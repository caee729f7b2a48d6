package gateway_test

import (
	"testing"
)

// TestDurationIsNeverShorterThanTheTimeToFirstToken: the time to first
// token is recorded as at least 1 ms (0 means none), and a request served
// within a millisecond was recorded with ttft_ms 1 and duration_ms 0,
// which the customer API and `tollgate events get` showed as a first
// token after the end (a fresh-user walk). Every event of a run of
// instant streams has duration_ms at least its ttft_ms.
func TestDurationIsNeverShorterThanTheTimeToFirstToken(t *testing.T) {
	body := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}` + "\n\ndata: [DONE]\n\n"
	up := jsonUpstream(t, "text/event-stream", body)
	st := oneProviderStack(t, "openai", up.URL)
	for i := range 200 {
		e, _ := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		if e.TTFTMillis == 0 || e.DurationMillis < e.TTFTMillis {
			t.Fatalf("request %d: ttft_ms %d, duration_ms %d; want a first token recorded, and a duration at least as long", i, e.TTFTMillis, e.DurationMillis)
		}
	}
}
