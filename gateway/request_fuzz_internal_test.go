package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/gemini"
	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// FuzzClientRequest: whatever body a client sends, the request side (the
// OpenAI parse and upstream body, the prompt estimates, attribution, and
// every provider's translation and native reading) answers or refuses it,
// and never panics: a panic there is a dropped connection, not the 400 a
// bad request is owed.
func FuzzClientRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"max_tokens":-1,"stop":["a"],"n":2,"reasoning_effort":"high","response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`,
		`{"model":"m","messages":[null,5,"x",{"role":5},{"role":"user","content":{"a":1}}],"tools":[null],"tool_choice":7,"stop":5}`,
		`{"model":"m","input":["a","b"],"prompt":[[1,2],[3]],"metadata":{"a":"b","c":1},"user":"u"}`,
		`{"contents":[{"role":"user","parts":[{"text":"hi"},{"functionCall":{"name":"f","args":{}}}]}],"systemInstruction":{"parts":[{"text":"s"}]},"tools":[{}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"metadata":{"user_id":"u"},"system":[{"type":"text","text":"s"}]}`,
		`[]`, `null`, `{}`, `{"model":""}`,
	} {
		f.Add([]byte(s))
	}
	chats := []provider.Chat{anthropic.Provider().Chat, gemini.Provider().Chat}
	var natives []provider.Route
	var embeddings []provider.Embeddings
	for _, p := range []provider.Provider{openai.Provider(), anthropic.Provider(), gemini.Provider()} {
		natives = append(natives, p.Routes...)
		if p.Embeddings != nil {
			embeddings = append(embeddings, p.Embeddings)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, err := parseChatRequest(body); err == nil {
			_ = req.checkPassedKeys(body)
			_, _ = req.upstreamBody("up")
			_ = chatPromptText(req.fields["messages"], req.fields["tools"], req.fields["functions"])
			_ = inputPrompt(req.fields["input"])
			_, _, _ = attribution(httptest.NewRequest("POST", "/", nil), stringField(req.fields["user"]), req.fields["metadata"])
		}
		for _, c := range chats {
			_, _, _ = c.Request(body, "up", true)
			_, _, _ = c.Request(body, "up", false)
		}
		for _, e := range embeddings {
			_, _, _ = e.Request(body, "up")
		}
		for _, rt := range natives {
			path := strings.TrimSuffix(rt.Pattern, "*") + "models/m:streamGenerateContent?alt=sse"
			if !strings.HasSuffix(rt.Pattern, "*") {
				path = rt.Pattern
			}
			if call, err := rt.Read(httptest.NewRequest("POST", path, nil), body); err == nil {
				_, _, _ = call.Upstream("up")
			}
			_ = rt.PromptText(body)
		}
	})
}
