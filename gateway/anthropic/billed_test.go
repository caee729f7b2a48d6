package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// BilledUsage writes the billed figures in the Messages API's shape, so
// that a client's SDK reads what was billed, and the tap reads back
// exactly them: input_tokens without the cache reads and writes, each of
// those apart, web search requests beside them.
func TestBilledUsageReadsBackAsBilled(t *testing.T) {
	billed := usage.Tokens{PromptTokens: 100, CachedTokens: 40, CacheWriteTokens: 25, CompletionTokens: 30, WebSearchRequests: 2}
	body := `{"type":"message","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`
	got := BilledUsage([]byte(body), billed)
	var m struct {
		Usage struct {
			InputTokens   int64 `json:"input_tokens"`
			CacheRead     int64 `json:"cache_read_input_tokens"`
			CacheWrite    int64 `json:"cache_creation_input_tokens"`
			OutputTokens  int64 `json:"output_tokens"`
			ServerToolUse struct {
				WebSearchRequests int64 `json:"web_search_requests"`
			} `json:"server_tool_use"`
		}
	}
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if u := m.Usage; u.InputTokens != 35 || u.CacheRead != 40 || u.CacheWrite != 25 || u.OutputTokens != 30 || u.ServerToolUse.WebSearchRequests != 2 {
		t.Errorf("usage %s", got)
	}
	var r tap.Report
	if err := BodyUsage(got, &r); err != nil || r.Usage != billed {
		t.Errorf("read back %+v (%v), want %+v", r.Usage, err, billed)
	}
}
