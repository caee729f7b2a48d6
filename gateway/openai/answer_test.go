package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAnswerAsChunk: a whole chat.completion becomes the one chunk a
// stream of it carries: a chat.completion.chunk whose choices have their
// message as their delta, with no usage member under any key encoding/json
// reads as "usage" ("Usage" too: a Go client would read it as the usage,
// which rides only in the usage chunk, the one billed); every other
// member as it was.
func TestAnswerAsChunk(t *testing.T) {
	got, err := AnswerAsChunk([]byte(`{"id":"c","object":"chat.completion","model":"m","x_vendor":{"cost":1},` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":1},"Usage":{"prompt_tokens":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	var chunk map[string]json.RawMessage
	if err := json.Unmarshal(got, &chunk); err != nil {
		t.Fatal(err)
	}
	for k := range chunk {
		if strings.EqualFold(k, "usage") {
			t.Errorf("%s: member %q kept", got, k)
		}
	}
	var choices []map[string]json.RawMessage
	if err := json.Unmarshal(chunk["choices"], &choices); err != nil || len(choices) != 1 {
		t.Fatalf("%s: choices %v", got, err)
	}
	if string(chunk["object"]) != `"chat.completion.chunk"` || string(chunk["x_vendor"]) != `{"cost":1}` ||
		string(choices[0]["delta"]) != `{"role":"assistant","content":"hi"}` || choices[0]["message"] != nil ||
		string(choices[0]["finish_reason"]) != `"stop"` {
		t.Errorf("chunk %s", got)
	}
	if _, err := AnswerAsChunk([]byte(`{"object":"chat.completion","usage":{}}`)); err == nil {
		t.Error("an answer without choices made a chunk")
	}
}
