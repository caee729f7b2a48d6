package gemini

import (
	"encoding/json"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// TestToolCallIDsAreUnique: Gemini gives function calls no id, and the
// translation named them "call_<i>", i counting the calls of one choice of
// one answer: every turn of a tool loop called its first tool "call_0",
// and so did every choice of n>1. OpenAI's tool call ids are unique, and
// clients key calls and results on them (a conversation history holding
// two "call_0" calls and two "call_0" results; continued on an Anthropic
// deployment of the same model alias, whose tool_use ids must be unique).
// Each id must name its answer, choice and call.
func TestToolCallIDsAreUnique(t *testing.T) {
	const resp = `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}},{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP","index":0},` +
		`{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP","index":1}],"usageMetadata":{"promptTokenCount":1}}`
	seen := map[string]string{}
	add := func(where, id string) {
		if id == "" {
			t.Errorf("%s: no id", where)
		} else if prev, dup := seen[id]; dup {
			t.Errorf("%s: id %q, already the id of %s", where, id, prev)
		}
		seen[id] = where
	}
	for _, chatID := range []string{"chatcmpl-01a246c4-c161-7de1-8ac1-068bb9930ed1", "chatcmpl-01a246c4-c1e2-7cd8-843f-eea38a6574a7"} {
		s := Chat{}.NewStream(chatID, "m", 1)
		r := new(tap.Report)
		var out [][]byte
		events(t, []byte("data: "+resp+"\n\n"), func(ev *sse.Event) { out = s.Event(ev, r, out) })
		out = s.(provider.ChunkStreamEnd).End(r, out)
		for _, p := range out {
			var c struct {
				Choices []struct {
					Index int `json:"index"`
					Delta struct {
						ToolCalls []struct {
							ID string `json:"id"`
						} `json:"tool_calls"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(p, &c); err != nil {
				t.Fatal(err)
			}
			for _, ch := range c.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					add(chatID+" streamed", tc.ID)
				}
			}
		}
		body, err := Chat{}.Body([]byte(resp), chatID+"0", "m", 1, new(tap.Report)) // another answer
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						ID string `json:"id"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatal(err)
		}
		for _, ch := range b.Choices {
			for _, tc := range ch.Message.ToolCalls {
				add(chatID+" not streamed", tc.ID)
			}
		}
	}
	if len(seen) != 12 {
		t.Errorf("%d distinct ids, want 12 (3 calls in each of 4 answers): %v", len(seen), seen)
	}
}
