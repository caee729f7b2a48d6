package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnthropicSDKNonStreamedEstimateShown: as
// TestOpenAISDKResponsesNonStreamedEstimateShown, on
// /anthropic/v1/messages: an answer without usage (an Anthropic-compatible
// upstream) is billed an estimate, and the client, whose Message.Usage
// always has Anthropic's figures, was told 0 input and 0 output tokens.
func TestAnthropicSDKNonStreamedEstimateShown(t *testing.T) {
	s, sc := scriptedStack(t)
	sc.set("msg-no-usage", cannedResp{body: `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"The quick brown fox jumps over the lazy dog."}],"stop_reason":"end_turn","stop_sequence":null}`})
	client := anthropic.NewClient(aoption.WithBaseURL(s.gateway+"/anthropic"), aoption.WithAPIKey(s.secret), aoption.WithMaxRetries(0))
	var resp *http.Response
	m, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "fake-anthropic/msg-no-usage", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say something"))}}, aoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens == 0 {
		t.Fatalf("event %+v, want an estimate", e.Event)
	}
	u := m.Usage
	if u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens != e.Usage.PromptTokens || u.OutputTokens != e.Usage.CompletionTokens {
		t.Fatalf("the client was told %s, the ledger billed %+v", u.RawJSON(), e.Usage)
	}
}

// TestGeminiSDKNonStreamedEstimateShown: the same on Gemini's
// generateContent, whose answer carries usageMetadata.
func TestGeminiSDKNonStreamedEstimateShown(t *testing.T) {
	s, sc := scriptedStack(t)
	sc.set("gen-no-usage", cannedResp{body: `{"candidates":[{"content":{"role":"model","parts":[{"text":"The quick brown fox jumps over the lazy dog."}]},"finishReason":"STOP","index":0}],"modelVersion":"m"}`})
	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: s.secret, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.gateway + "/gemini", APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	before := s.newestID()
	r, err := client.Models.GenerateContent(ctx, "fake-gemini/gen-no-usage", genai.Text("say something"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := s.newEvent(before)
	if e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens == 0 {
		t.Fatalf("event %+v, want an estimate", e.Event)
	}
	u := r.UsageMetadata
	if u == nil || int64(u.PromptTokenCount) != e.Usage.PromptTokens ||
		int64(u.CandidatesTokenCount+u.ThoughtsTokenCount) != e.Usage.CompletionTokens || int64(u.TotalTokenCount) != e.Usage.Total() {
		t.Fatalf("the client was told %+v, the ledger billed %+v", u, e.Usage)
	}
}

// TestOpenAISDKResponsesStreamedEstimateShown: as
// TestOpenAISDKResponsesNonStreamedEstimateShown, streamed: a
// response.completed whose usage is null (a compatible server's) is billed
// an estimate, and the client, which reads the usage from the completed
// response, was told 0 input and 0 output tokens.
func TestOpenAISDKResponsesStreamedEstimateShown(t *testing.T) {
	s, sc := scriptedStack(t)
	sc.set("resp-stream-no-usage", cannedResp{body: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"m\",\"output\":[]}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"The quick brown fox jumps over the lazy dog.\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"m\",\"output\":[],\"usage\":null}}\n\n"})
	var resp *http.Response
	st := oaClient(s, 0).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "fake/resp-stream-no-usage",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("say something")}}, option.WithResponseInto(&resp))
	var completed *responses.Response
	for st.Next() {
		if ev := st.Current(); ev.Type == "response.completed" {
			r := ev.AsResponseCompleted().Response
			completed = &r
		}
	}
	if err := st.Err(); err != nil || completed == nil {
		t.Fatalf("stream error %v, completed %v", err, completed)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens == 0 {
		t.Fatalf("event %+v, want an estimate", e.Event)
	}
	if u := completed.Usage; u.InputTokens != e.Usage.PromptTokens || u.OutputTokens != e.Usage.CompletionTokens {
		t.Fatalf("the client was told %d input and %d output tokens, the ledger billed %+v", u.InputTokens, u.OutputTokens, e.Usage)
	}
}
