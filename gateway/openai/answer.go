package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// AnswerAsChunk turns a whole answer (a chat.completion object, or a
// legacy text_completion) into the one chunk a stream of it would have
// carried, for an upstream that answered a stream request with a body:
// each choice's "message" becomes its "delta", a chat.completion becomes a
// chat.completion.chunk, and "usage" is removed (under any key that
// encoding/json reads as it) (usage rides only in the
// usage chunk, which the relay writes once the event is durable). Every
// other member passes unchanged. It is not on the streaming path, so it
// uses encoding/json. It returns an error for a body that is not a JSON
// object with a choices array.
func AnswerAsChunk(body []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	var choices []map[string]json.RawMessage
	if err := json.Unmarshal(obj["choices"], &choices); err != nil || choices == nil {
		return nil, errors.New("the answer has no choices array")
	}
	for _, c := range choices {
		if m, ok := c["message"]; ok {
			delete(c, "message")
			c["delta"] = m
		}
	}
	b, err := json.Marshal(choices)
	if err != nil {
		return nil, err
	}
	obj["choices"] = b
	if bytes.Equal(obj["object"], []byte(`"chat.completion"`)) {
		obj["object"] = json.RawMessage(`"chat.completion.chunk"`)
	}
	for k := range obj {
		if strings.EqualFold(k, "usage") { // as encoding/json reads it: "Usage" too
			delete(obj, k)
		}
	}
	return json.Marshal(obj)
}
