package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// exactCount reads the value a decoder that matches keys exactly
// (JavaScript's JSON.parse, Python's json) finds at path in a JSON object:
// the last member spelled exactly; -1 when there is none.
func exactCount(t *testing.T, data string, path ...string) int64 {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(data))
	d.UseNumber()
	var m map[string]any // map keys are kept as spelled: no case folding
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	var v any = m
	for _, k := range path {
		o, ok := v.(map[string]any)
		if !ok {
			return -1
		}
		v = o[k]
	}
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	i, _ := n.Int64()
	return i
}

// TestUsageCountSpelledTwiceByCase: a usage object whose count is spelled
// twice, exactly and in another case ("PROMPT_TOKENS", or U+212A KELVIN
// SIGN for 'k'), is read by encoding/json case-insensitively, the last
// winning, while a client's decoder reads the exact key: the gateway
// billed prompt 10 and relayed a usage saying 1,000,000 (a review). The
// client now reads what was billed, streamed and not.
func TestUsageCountSpelledTwiceByCase(t *testing.T) {
	chunk := func(s string) string { return "data: " + s + "\n\n" }
	c1 := chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello there"},"finish_reason":null}]}`)
	c2 := chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	for name, u := range map[string]string{
		"upper":   `{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020,"PROMPT_TOKENS":10}`,
		"kelvin":  `{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020,"prompt_to` + "\u212a" + `ens":10}`,
		"details": `{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020,"prompt_tokens_details":{"cached_tokens":900,"Cached_Tokens":0}}`,
	} {
		t.Run("stream "+name, func(t *testing.T) {
			c3 := chunk(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":` + u + `}`)
			up := jsonUpstream(t, "text/event-stream", c1+c2+c3+"data: [DONE]\n\n")
			e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/chat/completions", chatReq)
			last := ""
			for _, line := range strings.Split(got, "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"usage"`) {
					last = d
				}
			}
			if last == "" {
				t.Fatalf("no usage chunk reached the client:\n%s", got)
			}
			if p, c := exactCount(t, last, "usage", "prompt_tokens"), exactCount(t, last, "usage", "prompt_tokens_details", "cached_tokens"); p != e.Usage.PromptTokens ||
				(c >= 0 || e.Usage.CachedTokens > 0) && c != e.Usage.CachedTokens {
				t.Errorf("the client's usage chunk says prompt %d, cached %d; the ledger bills %d, %d", p, c, e.Usage.PromptTokens, e.Usage.CachedTokens)
			}
		})
	}
	t.Run("body", func(t *testing.T) {
		body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there friend"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020,"Prompt_tokens":10}}`
		up := jsonUpstream(t, "application/json", body)
		e, got := doRequest(t, oneProviderStack(t, "openai", up.URL), "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if read := exactCount(t, got, "usage", "prompt_tokens"); read != e.Usage.PromptTokens {
			t.Errorf("the client's body says prompt_tokens %d, the ledger bills %d", read, e.Usage.PromptTokens)
		}
	})
}
