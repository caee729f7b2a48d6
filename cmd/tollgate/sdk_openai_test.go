package main

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate-dev/tollgate/gateway/fixture"
)

// replayStack is a stack with the recorded-stream upstream as providers
// replay (openai), replay-anthropic and replay-gemini, and the replay
// server's URL.
func replayStack(t *testing.T) (*stack, string) {
	dir, err := fixture.Dir()
	if err != nil {
		t.Fatal(err)
	}
	replay := replayUpstream(t, dir)
	s := newStack(t, func(c *fileConfig) { c.Providers = append(c.Providers, replayProviders(replay.URL)...) })
	return s, replay.URL
}

// accumulate streams a recorded chat completion with the official SDK and
// returns what its accumulator builds.
func accumulate(t *testing.T, baseURL, key, model string, includeUsage bool) openai.ChatCompletion {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey(key), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("call the tools")}}
	if includeUsage {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the SDK's accumulator rejected %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return acc.ChatCompletion
}

// TestOpenAISDKToolCallStreams: what the SDK accumulates through the gateway
// (tool calls by index, content, finish reason, usage) equals what it
// accumulates from the upstream directly.
func TestOpenAISDKToolCallStreams(t *testing.T) {
	s, replayURL := replayStack(t)
	for _, name := range []string{"openai~chat-tool-call-usage.sse", "openai~chat-parallel-tool-calls-usage.sse",
		"openai~openrouter-chat-cached-reasoning-usage.sse"} {
		for _, include := range []bool{true, false} {
			direct := accumulate(t, replayURL+"/v1", "x", name, true)
			via := accumulate(t, s.gateway+"/v1", s.secret, "replay/"+name, include)
			if len(via.Choices) != 1 || len(direct.Choices) != 1 {
				t.Fatalf("%s: %d choices via the gateway, %d direct", name, len(via.Choices), len(direct.Choices))
			}
			d, v := direct.Choices[0], via.Choices[0]
			if v.Message.Content != d.Message.Content || v.FinishReason != d.FinishReason || len(v.Message.ToolCalls) != len(d.Message.ToolCalls) {
				t.Fatalf("%s: via the gateway %+v, direct %+v", name, v, d)
			}
			for i := range d.Message.ToolCalls {
				if v.Message.ToolCalls[i].ID != d.Message.ToolCalls[i].ID || v.Message.ToolCalls[i].Function.Name != d.Message.ToolCalls[i].Function.Name ||
					v.Message.ToolCalls[i].Function.Arguments != d.Message.ToolCalls[i].Function.Arguments {
					t.Fatalf("%s: tool call %d via the gateway %+v, direct %+v", name, i, v.Message.ToolCalls[i], d.Message.ToolCalls[i])
				}
			}
			du, vu := direct.Usage, via.Usage
			switch {
			case include && (vu.PromptTokens != du.PromptTokens || vu.CompletionTokens != du.CompletionTokens || vu.TotalTokens != du.TotalTokens ||
				vu.PromptTokensDetails.CachedTokens != du.PromptTokensDetails.CachedTokens ||
				vu.CompletionTokensDetails.ReasoningTokens != du.CompletionTokensDetails.ReasoningTokens):
				t.Fatalf("%s: usage via the gateway %+v, direct %+v", name, vu, du)
			case !include && vu.TotalTokens != 0:
				t.Fatalf("%s: usage reached a client that did not ask: %+v", name, vu)
			}
		}
	}
}

// TestOpenAISDKResponsesAPI streams recorded Responses API streams through
// /v1/responses with the official SDK: every event parses, and the final
// usage the SDK sees equals the upstream's.
func TestOpenAISDKResponsesAPI(t *testing.T) {
	s, _ := replayStack(t)
	client := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(0))
	for name, want := range map[string][2]int64{
		"openai-responses~function-call-reasoning-usage.sse":     {53, 469},
		"openai-responses~web-search-cached-reasoning-usage.sse": {9463, 582},
	} {
		stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
			Model: "replay/" + name, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		var completed *responses.Response
		events := 0
		for stream.Next() {
			events++
			if ev := stream.Current(); ev.Type == "response.completed" {
				r := ev.AsResponseCompleted().Response
				completed = &r
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if completed == nil || completed.Usage.InputTokens != want[0] || completed.Usage.OutputTokens != want[1] {
			t.Fatalf("%s: %d events, completed %+v, want usage %v", name, events, completed, want)
		}
	}
}
