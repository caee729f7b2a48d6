package gemini

import (
	"encoding/json"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// BilledUsage writes the billed figures in Gemini's shape, so that a
// client's SDK reads what was billed, and the tap reads back exactly them:
// the cache reads within the prompt, the thoughts apart from the
// candidates, the total the sum.
func TestBilledUsageReadsBackAsBilled(t *testing.T) {
	billed := usage.Tokens{PromptTokens: 100, CachedTokens: 40, CompletionTokens: 30, ReasoningTokens: 10}
	body := `{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1}}`
	got := BilledUsage([]byte(body), billed)
	var m struct{ UsageMetadata map[string]int64 }
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	want := map[string]int64{"promptTokenCount": 100, "cachedContentTokenCount": 40, "candidatesTokenCount": 20,
		"thoughtsTokenCount": 10, "totalTokenCount": 130}
	if len(m.UsageMetadata) != len(want) {
		t.Errorf("usageMetadata %v, want %v", m.UsageMetadata, want)
	}
	for k, v := range want {
		if m.UsageMetadata[k] != v {
			t.Errorf("%s %d, want %d (%s)", k, m.UsageMetadata[k], v, got)
		}
	}
	var r tap.Report
	if err := BodyUsage(got, &r); err != nil || r.Usage != billed {
		t.Errorf("read back %+v (%v), want %+v", r.Usage, err, billed)
	}
}
