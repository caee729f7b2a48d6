package gemini

import (
	"encoding/json"

	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// BilledUsage sets a generateContent answer's "usageMetadata" to t, in the
// Gemini API's shape: promptTokenCount (cachedContentTokenCount a subset
// of it), candidatesTokenCount (the output that is not thoughts),
// thoughtsTokenCount and totalTokenCount, so that a client whose SDK reads
// usageMetadata reads what was billed. It returns body unchanged when it
// is not a JSON object (streamGenerateContent's array).
func BilledUsage(body []byte, t usage.Tokens) []byte {
	u, err := json.Marshal(map[string]int64{
		"promptTokenCount":        t.PromptTokens,
		"cachedContentTokenCount": t.CachedTokens,
		"candidatesTokenCount":    max(t.CompletionTokens-t.ReasoningTokens, 0),
		"thoughtsTokenCount":      t.ReasoningTokens,
		"totalTokenCount":         t.Total(),
	})
	if err != nil {
		return body
	}
	return jsonscan.ReplaceMember(body, "usageMetadata", u)
}
