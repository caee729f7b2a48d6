package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestChatCompletionsTranslatedToAnthropicAndGemini sends OpenAI chat
// requests, streamed and not, to models served by the simulator's
// Anthropic and Gemini endpoints: the OpenAI SDK gets OpenAI-shaped
// answers, and the ledger the provider's usage, normalized.
func TestChatCompletionsTranslatedToAnthropicAndGemini(t *testing.T) {
	s := newStack(t, nil)
	client := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(0))
	ctx := context.Background()
	for _, model := range []string{"claude-sim", "gemini-sim"} {
		params := openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(10),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("one two three four")}}
		// What the simulator bills for the request the gateway sends it.
		var want sim.Usage
		var err error
		if model == "claude-sim" {
			want, err = sim.ExpectedAnthropicUsage([]byte(`{"model":"sim-pro","max_tokens":10,"system":"be brief","messages":[{"role":"user","content":"one two three four"}]}`))
		} else {
			want, err = sim.ExpectedGeminiUsage("sim-pro", []byte(`{"systemInstruction":{"parts":[{"text":"be brief"}]},"contents":[{"role":"user","parts":[{"text":"one two three four"}]}],"generationConfig":{"maxOutputTokens":10}}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		wantUsage := usage.Tokens{PromptTokens: want.PromptTokens, CachedTokens: want.CachedTokens,
			CompletionTokens: want.CompletionTokens, ReasoningTokens: want.ReasoningTokens}
		if model == "claude-sim" {
			wantUsage.ReasoningTokens = 0 // Anthropic does not split thinking out of output_tokens
		}

		var resp *http.Response
		res, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatalf("%s not streamed: %v", model, err)
		}
		if res.Usage.PromptTokens != wantUsage.PromptTokens || res.Usage.CompletionTokens != wantUsage.CompletionTokens ||
			!strings.Contains(res.Choices[0].Message.Content, "tok") || res.Choices[0].FinishReason != "length" {
			t.Fatalf("%s not streamed: %+v, want usage %+v", model, res, wantUsage)
		}
		if e := s.event(resp.Header.Get("X-Request-Id")); e.Usage != wantUsage || e.UsageSource != usage.SourceUpstream || e.Provider != map[string]string{"claude-sim": "sim-anthropic", "gemini-sim": "sim-gemini"}[model] {
			t.Fatalf("%s not streamed: event %+v, want %+v", model, e.Event, wantUsage)
		}

		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("%s: the SDK rejected %s", model, stream.Current().RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Choices[0].Message.Content != res.Choices[0].Message.Content || acc.Usage.PromptTokens != wantUsage.PromptTokens {
			t.Fatalf("%s streamed: %+v, not streamed: %+v", model, acc.ChatCompletion, res)
		}
		if e := s.event(resp.Header.Get("X-Request-Id")); e.Usage != wantUsage || !e.Stream {
			t.Fatalf("%s streamed: event %+v, want %+v", model, e.Event, wantUsage)
		}
	}
}

func TestModelsListsTheModelTable(t *testing.T) {
	s := newStack(t, nil)
	req, _ := http.NewRequest("GET", s.gateway+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+s.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID+"@"+m.OwnedBy)
	}
	if got := strings.Join(ids, ","); list.Object != "list" || got != "sim-small@sim,sim-pro@sim,claude-sim@sim-anthropic,gemini-sim@sim-gemini" {
		t.Fatalf("models = %s %s", list.Object, got)
	}
}
