package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAnthropicChatToolInputInBlockStart: an Anthropic stream whose tool_use
// block carries its input whole in content_block_start (no
// input_json_delta) was billed for that input as output, but the chat
// translation sent the client arguments "{}" (a review). The client gets
// the input as the call's arguments; Anthropic's own streams ({} there,
// then fragments) are unchanged.
func TestAnthropicChatToolInputInBlockStart(t *testing.T) {
	msg := func(blocks string) string {
		return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
			blocks +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":15}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	start := func(input string) string {
		return "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":" + input + "}}\n\n"
	}
	fragments := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n"
	for name, c := range map[string]struct{ blocks, want string }{
		"whole":     {start(`{ "city" : "Paris" }`), `{"city":"Paris"}`},
		"fragments": {start(`{}`) + fragments, `{"city": "Paris"}`},
		"none":      {start(`{}`), `{}`},
	} {
		t.Run(name, func(t *testing.T) {
			up := jsonUpstream(t, "text/event-stream", msg(c.blocks))
			_, got := doRequest(t, oneProviderStack(t, "anthropic", up.URL), "/v1/chat/completions", chatReq)
			args := ""
			for _, line := range strings.Split(got, "\n") {
				d, ok := strings.CutPrefix(line, "data: ")
				if !ok || d == "[DONE]" {
					continue
				}
				var ch struct {
					Choices []struct {
						Delta struct {
							ToolCalls []struct {
								Function struct{ Arguments string } `json:"function"`
							} `json:"tool_calls"`
						} `json:"delta"`
					} `json:"choices"`
				}
				if json.Unmarshal([]byte(d), &ch) == nil && len(ch.Choices) > 0 {
					for _, tc := range ch.Choices[0].Delta.ToolCalls {
						args += tc.Function.Arguments
					}
				}
			}
			if args != c.want {
				t.Errorf("the client's tool call arguments add up to %q, want %q:\n%s", args, c.want, got)
			}
		})
	}
}
