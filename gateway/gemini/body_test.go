package gemini

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

func TestBody(t *testing.T) {
	dir, _ := geminiFixtures(t)
	tests := []struct{ name, in, want string }{
		{"recorded implicit caching", string(readFixture(t, dir, "gemini/NONSTREAM-unary-implicit-caching.json")),
			`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gemini-test","choices":[{"index":0,
			  "message":{"role":"assistant","content":"Red Riding Hood is looking for **directions** in the forest."},"finish_reason":"stop"}],
			  "usage":{"prompt_tokens":12013,"completion_tokens":88,"total_tokens":12101,"prompt_tokens_details":{"cached_tokens":11243},"completion_tokens_details":{"reasoning_tokens":73}}}`},
		{"thoughts, tool calls, two candidates", `{"candidates":[
			  {"content":{"parts":[{"text":"hmm","thought":true},{"functionCall":{"name":"f","args":{"a":1}}},{"functionCall":{"name":"g"}}]},"finishReason":"STOP","index":0},
			  {"content":{"parts":[{"text":"<b>&"}]},"finishReason":"SAFETY","index":1}],
			 "usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":7,"thoughtsTokenCount":2},"modelVersion":"gemini-2.5-pro"}`,
			`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gemini-test","choices":[
			  {"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"hmm","tool_calls":[
			    {"id":"call_1_0_0","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},
			    {"id":"call_1_0_1","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"},
			  {"index":1,"message":{"role":"assistant","content":"<b>&"},"finish_reason":"content_filter"}],
			 "usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}}`},
		{"array of streamed responses, no usage", `[{"candidates":[{"content":{"parts":[{"text":"a"}]}}]},{"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"MAX_TOKENS"}]}]`,
			`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gemini-test","choices":[
			  {"index":0,"message":{"role":"assistant","content":"ab"},"finish_reason":"length"}]}`},
		{"choices in index order, whatever the candidates' order", `{"candidates":[
			  {"content":{"parts":[{"text":"second"}]},"finishReason":"STOP","index":1},
			  {"content":{"parts":[{"text":"first"}]},"finishReason":"STOP","index":0}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gemini-test","choices":[
			  {"index":0,"message":{"role":"assistant","content":"first"},"finish_reason":"stop"},
			  {"index":1,"message":{"role":"assistant","content":"second"},"finish_reason":"stop"}]}`},
		{"a call with null args has arguments {}", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":null}}]},"finishReason":"STOP"}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gemini-test","choices":[
			  {"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
			    {"id":"call_1_0_0","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
		{"blocked prompt", `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":3}}`,
			`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gemini-test","choices":[
			  {"index":0,"message":{"role":"assistant","content":null},"finish_reason":"content_filter"}],
			 "usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r tap.Report
			got, err := Chat{}.Body([]byte(tt.in), "chatcmpl-1", "gemini-test", 1700000000, &r)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if strings.Contains(string(got), `\u003c`) {
				t.Errorf("HTML escaped: %s", got)
			}
		})
	}
}

func TestBodyErrors(t *testing.T) {
	var r tap.Report
	_, err := Chat{}.Body([]byte(`{"error":{"code":400,"message":"bad key","status":"INVALID_ARGUMENT"}}`), "i", "m", 1, &r)
	if err == nil || !strings.Contains(err.Error(), "bad key") || r.FinishReason != "error" {
		t.Errorf("error body: %v, finish %q", err, r.FinishReason)
	}
	if _, err := (Chat{}).Body([]byte("<html>"), "i", "m", 1, &tap.Report{}); err != ErrNoResponse {
		t.Errorf("not JSON: %v", err)
	}
}
