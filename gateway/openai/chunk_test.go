package openai

import (
	"encoding/json"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAppendUsageChunkIsOpenAIsUsageChunk: the usage chunk the gateway
// writes is OpenAI's include_usage chunk: the stream's id, object, created
// and model, "choices":[] (an SDK that reads choices[] before usage finds
// an empty array, not none), and the usage billed, its total the prompt
// and completion, cache writes only when there are any.
func TestAppendUsageChunkIsOpenAIsUsageChunk(t *testing.T) {
	u := usage.Tokens{PromptTokens: 100, CachedTokens: 40, CacheWriteTokens: 10, CompletionTokens: 30, ReasoningTokens: 20}
	data := AppendUsageChunk(nil, "chat.completion.chunk", "chatcmpl-\"1\"", "m\n", 7, u)
	var chunk struct {
		ID, Object, Model string
		Created           int64
		Choices           json.RawMessage
		Usage             Usage
	}
	if err := json.Unmarshal(data, &chunk); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if chunk.ID != "chatcmpl-\"1\"" || chunk.Object != "chat.completion.chunk" || chunk.Model != "m\n" || chunk.Created != 7 || string(chunk.Choices) != "[]" {
		t.Errorf("chunk %s", data)
	}
	if got := chunk.Usage.Meter(); got != u || chunk.Usage.TotalTokens != 130 {
		t.Errorf("usage %+v (total %d), want %+v (total 130)", got, chunk.Usage.TotalTokens, u)
	}
	c, err := ParseChunk(data)
	if err != nil || !c.UsageOnly() {
		t.Errorf("%s: read back as a usage chunk: %v", data, err)
	}
	if data := AppendUsage(nil, usage.Tokens{PromptTokens: 1}); string(data) !=
		`{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}` {
		t.Errorf("usage without cache writes: %s", data)
	}
}
