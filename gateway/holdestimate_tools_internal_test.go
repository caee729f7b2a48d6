package gateway

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestHoldEstimateHoldsAnthropicsToolPrompts: Anthropic bills, on a
// request with tools, input its body does not hold: the tool use system
// prompt (up to 530 tokens, by Anthropic's table) and, for each tool it
// defines itself, that tool's definition (the text editor's 700 tokens,
// the bash tool's 245, computer use's 735 and its 499-token system
// prompt), from a tool entry of a few dozen bytes. Held at a token a byte
// of the body, a 150-byte request with max_tokens 1 and the text editor,
// billed about 1,100 input tokens, held a seventh of it: requests sent
// together on a spend limit were admitted until their holds filled it,
// and were charged several times over it.
func TestHoldEstimateHoldsAnthropicsToolPrompts(t *testing.T) {
	s := &Server{rates: oneRate{Currency: "USD", InputMicros: 1_000_000, CacheWriteMicros: 1_250_000, OutputMicros: 2_000_000,
		EffectiveFrom: time.Unix(0, 0)}}
	k := &usage.KeyState{CustomerID: "c", KeyID: "k"}
	const head = `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		name, tools string
		hidden      int64 // the least Anthropic bills beyond the body, in tokens
	}{
		{"a tool of the client's", `[{"name":"f","input_schema":{"type":"object"}}]`, 530},
		{"a custom tool so typed", `[{"type":"custom","name":"f","input_schema":{"type":"object"}}]`, 530},
		{"the text editor", `[{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}]`, 346 + 700},
		{"the bash tool", `[{"type":"bash_20250124","name":"bash"}]`, 346 + 245},
		{"computer use", `[{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}]`, 346 + 735 + 499},
		{"all three", `[{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"bash_20250124","name":"bash"},` +
			`{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}]`, 346 + 700 + 245 + 735 + 499},
	} {
		body := []byte(head + `,"tools":` + c.tools + `}`)
		at := []prepared{{attempt: attempt{model: "m"}, path: "/v1/messages", body: body}}
		// The prompt at the cache-write price ($1.25 per 1M), the one
		// output token at $2: in nano-units.
		least := (int64(len(body))+c.hidden)*1250 + 2000
		if got := s.holdEstimate(k, at, "/anthropic/v1/messages", time.Now()); got < least {
			t.Errorf("%s, a body of %d bytes: %d nano-units held, want at least %d (%d tokens it bills beyond the body)",
				c.name, len(body), got, least, c.hidden)
		}
	}
	// Without tools, and on chat completions (whose tools' JSON is longer
	// than the tokens they bill), the body alone.
	for _, p := range []struct{ path, body string }{
		{"/v1/messages", head + `}`},
		{"/v1/messages", head + `,"tools":[]}`},
		{"/chat/completions", head + `,"tools":[{"type":"function","function":{"name":"f"}}]}`},
	} {
		at := []prepared{{attempt: attempt{model: "m"}, path: p.path, body: []byte(p.body)}}
		if got, want := s.holdEstimate(k, at, "/v1/chat/completions", time.Now()), int64(len(p.body))*1250+2000; got != want {
			t.Errorf("%s %s: %d nano-units held, want %d", p.path, p.body, got, want)
		}
	}
}
