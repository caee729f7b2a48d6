package anthropic

import (
	"encoding/json"

	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// BilledUsage sets a non-streamed message's "usage" to t, in the Messages
// API's shape: input_tokens (the input that is neither a cache read nor a
// cache write), cache_read_input_tokens, cache_creation_input_tokens and
// output_tokens, and server_tool_use.web_search_requests when there were
// any, so that a client whose SDK reads Message.usage reads what was
// billed. It returns body unchanged when it is not a JSON object.
func BilledUsage(body []byte, t usage.Tokens) []byte {
	m := map[string]any{
		"input_tokens":                max(t.PromptTokens-t.CachedTokens-t.CacheWriteTokens, 0),
		"cache_creation_input_tokens": t.CacheWriteTokens,
		"cache_read_input_tokens":     t.CachedTokens,
		"output_tokens":               t.CompletionTokens,
	}
	if t.WebSearchRequests > 0 {
		m["server_tool_use"] = map[string]int64{"web_search_requests": t.WebSearchRequests}
	}
	u, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return jsonscan.ReplaceMember(body, "usage", u)
}
