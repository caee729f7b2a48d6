package gateway_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// finishChunks counts the chunks of a chat stream whose choice 0 has a
// finish_reason.
func finishChunks(t *testing.T, got string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(got, "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(d), &c) == nil && len(c.Choices) > 0 && c.Choices[0].FinishReason != nil {
			n++
		}
	}
	return n
}

// TestGeminiChatOneFinishPerChoice: Vertex AI puts finishReason "STOP" on
// every chunk of a stream (fixtures/gemini/vertex-error-mid-stream.sse).
// The chat translation made each a finish chunk: the client got
// finish_reason "stop" after every piece of content, where OpenAI sends
// one per choice, on its last chunk, and a client that ends a choice at
// its finish_reason kept the first piece only (a review). It comes once,
// after the last content, and the whole text before it.
func TestGeminiChatOneFinishPerChoice(t *testing.T) {
	c := func(text string, cand int) string {
		return `data: {"candidates": [{"content": {"parts": [{"text": "` + text + `"}],"role": "model"},"finishReason": "STOP","index": 0}],` +
			`"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": ` + strconv.Itoa(cand) + `,"totalTokenCount": ` + strconv.Itoa(5+cand) + `}}` + "\r\n\r\n"
	}
	up := jsonUpstream(t, "text/event-stream", c("First ", 1)+c("Second ", 2)+c("Third", 3))
	e, got := doRequest(t, oneProviderStack(t, "gemini", up.URL), "/v1/chat/completions", chatReq)
	if n := finishChunks(t, got); n != 1 {
		t.Errorf("%d chunks carry a finish_reason for choice 0, want 1:\n%s", n, got)
	}
	before, _, ok := strings.Cut(got, `"finish_reason":"stop"`)
	if !ok || !strings.Contains(before, "Third") {
		t.Errorf("the finish chunk does not follow the last content:\n%s", got)
	}
	if e.Usage.CompletionTokens != 3 || e.FinishReason != "stop" {
		t.Errorf("billed %+v, finish %q; want the last report's 3 completion tokens, stop", e.Usage, e.FinishReason)
	}
}
