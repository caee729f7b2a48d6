package sim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// TestOpenAISDK checks that the official Go SDK parses the simulator's
// streamed and non-streamed responses and finds the usage.
func TestOpenAISDK(t *testing.T) {
	s, srv := start(t)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model: "sim-pro",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("be brief"),
			openai.UserMessage("one two three four"),
		},
		MaxCompletionTokens: openai.Int(10),
		StreamOptions:       openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		Metadata:            shared.Metadata{"sim_chunks": "2"},
	}
	ctx := context.Background()
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("accumulator rejected chunk %d", chunks)
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// role, 2 content, finish, usage.
	if chunks != 5 {
		t.Errorf("%d chunks", chunks)
	}
	u := acc.Usage
	if u.PromptTokens != 17 || u.CompletionTokens != 10 || u.TotalTokens != 27 ||
		u.PromptTokensDetails.CachedTokens != 8 || u.CompletionTokensDetails.ReasoningTokens != 5 {
		t.Errorf("usage %+v", u)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != strings.Repeat("tok ", 5) ||
		acc.Choices[0].FinishReason != "length" || acc.Model != "sim-pro" {
		t.Errorf("completion %+v", acc.ChatCompletion)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	res, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.PromptTokens != u.PromptTokens || res.Usage.CompletionTokens != u.CompletionTokens ||
		res.Usage.PromptTokensDetails.CachedTokens != 8 || res.Usage.CompletionTokensDetails.ReasoningTokens != 5 ||
		res.Choices[0].Message.Content != acc.Choices[0].Message.Content {
		t.Errorf("non-streamed %+v", res)
	}

	// A mid-stream error reaches the SDK as a stream error.
	stream = client.Chat.Completions.NewStreaming(ctx, params, option.WithHeader("X-Sim-Fault", "error_after:1"))
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "server_error") {
		t.Errorf("error_after: stream error %v", err)
	}
	if st := waitStats(t, s, 3); st.Requests.OK != 2 || st.Requests.StreamError != 1 {
		t.Errorf("stats %+v", st)
	}
}
