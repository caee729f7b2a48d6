package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// streamAnthropic streams one Messages request with the official SDK from
// baseURL and returns what its accumulator builds and the response.
func streamAnthropic(t *testing.T, baseURL, key, model string) (anthropic.Message, *http.Response) {
	t.Helper()
	client := anthropic.NewClient(aoption.WithBaseURL(baseURL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	var resp *http.Response
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: anthropic.Model(model), MaxTokens: 12,
		System:   []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("think, then use the tools"))},
		Metadata: anthropic.MetadataParam{UserID: anthropic.String("sim_chunks=3")},
	}, aoption.WithResponseInto(&resp))
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("the SDK could not accumulate %s: %v", stream.Current().RawJSON(), err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return msg, resp
}

// sameMessage compares what matters of two accumulated messages: every
// content block (text, thinking, tool use and its input) and the usage.
func sameMessage(t *testing.T, name string, via, direct anthropic.Message) {
	t.Helper()
	if len(direct.Content) == 0 || direct.Usage.OutputTokens == 0 {
		t.Fatalf("%s: the upstream produced nothing to compare: %+v", name, direct)
	}
	if len(via.Content) != len(direct.Content) || via.StopReason != direct.StopReason || via.Usage.RawJSON() != direct.Usage.RawJSON() {
		t.Fatalf("%s: via the gateway %d blocks, stop %s, usage %s; direct %d blocks, stop %s, usage %s", name,
			len(via.Content), via.StopReason, via.Usage.RawJSON(), len(direct.Content), direct.StopReason, direct.Usage.RawJSON())
	}
	for i := range direct.Content {
		v, d := via.Content[i], direct.Content[i]
		if v.Type != d.Type || v.Text != d.Text || v.Thinking != d.Thinking || v.Name != d.Name || string(v.Input) != string(d.Input) {
			t.Fatalf("%s: block %d via the gateway %+v, direct %+v", name, i, v, d)
		}
	}
}

// TestAnthropicSDKThroughGateway: the official Anthropic SDK streams through
// /anthropic/v1/messages with thinking (the simulator) and parallel tool
// use (a recording); it accumulates exactly what it does from the upstream
// directly, and the ledger holds that usage.
func TestAnthropicSDKThroughGateway(t *testing.T) {
	s, replayURL := replayStack(t)
	for _, c := range []struct{ name, via, directURL, direct string }{
		{"simulator, thinking", "claude-sim", s.simURL, "sim-pro"},
		{"recording, parallel tools", "replay-anthropic/anthropic~parallel-tool-use-legacy-delta-usage.sse", replayURL, "anthropic~parallel-tool-use-legacy-delta-usage.sse"},
		{"recording, thinking", "replay-anthropic/anthropic~thinking-signature-ping.sse", replayURL, "anthropic~thinking-signature-ping.sse"},
	} {
		via, resp := streamAnthropic(t, s.gateway+"/anthropic", s.secret, c.via)
		direct, _ := streamAnthropic(t, c.directURL, "x", c.direct)
		sameMessage(t, c.name, via, direct)
		e := s.event(resp.Header.Get("X-Request-Id"))
		u := direct.Usage
		want := usage.Tokens{PromptTokens: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens, CompletionTokens: u.OutputTokens}
		if e.Usage != want || e.UsageSource != usage.SourceUpstream || e.Endpoint != "/anthropic/v1/messages" {
			t.Fatalf("%s: event %+v, want usage %+v from upstream", c.name, e.Event, want)
		}
	}
}

// streamGemini streams one request with the official genai SDK, at the
// API version apiVersion ("" for the SDK's default).
func streamGemini(t *testing.T, baseURL, apiVersion, key, model string) (text, thoughts string, calls []string, last *genai.GenerateContentResponse) {
	t.Helper()
	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: baseURL, APIVersion: apiVersion}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &genai.GenerateContentConfig{MaxOutputTokens: 12, ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true}}
	for resp, err := range client.Models.GenerateContentStream(ctx, model, genai.Text("think, then call"), cfg) {
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		for _, cand := range resp.Candidates {
			if cand.Content == nil {
				continue
			}
			for _, p := range cand.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					args, _ := json.Marshal(p.FunctionCall.Args)
					calls = append(calls, p.FunctionCall.Name+string(args))
				case p.Thought:
					thoughts += p.Text
				default:
					text += p.Text
				}
			}
		}
		last = resp
	}
	return text, thoughts, calls, last
}

// TestGeminiSDKThroughGateway: the official genai SDK streams through the
// Gemini pass-through with thoughts (the simulator) and a function call (a
// recording); it sees what it sees from the upstream directly, and the
// ledger holds the final usageMetadata. The SDK's API version v1 (its
// default since v1.79) is served as v1beta is.
func TestGeminiSDKThroughGateway(t *testing.T) {
	s, replayURL := replayStack(t)
	for _, c := range []struct{ name, via, directURL, direct, version string }{
		{"simulator, thoughts", "gemini-sim", s.simURL, "sim-pro", "v1beta"},
		{"simulator, thoughts, v1", "gemini-sim", s.simURL, "sim-pro", "v1"},
		{"recording, function call", "replay-gemini/gemini~gemini3-function-call-thoughts.sse", replayURL, "gemini~gemini3-function-call-thoughts.sse", "v1beta"},
	} {
		before := s.newestID()
		vText, vThoughts, vCalls, vLast := streamGemini(t, s.gateway+"/gemini", c.version, s.secret, c.via)
		dText, dThoughts, dCalls, dLast := streamGemini(t, c.directURL, "v1beta", "x", c.direct)
		if dText+dThoughts == "" && len(dCalls) == 0 {
			t.Fatalf("%s: the upstream produced nothing to compare", c.name)
		}
		if vText != dText || vThoughts != dThoughts || strings.Join(vCalls, "|") != strings.Join(dCalls, "|") || vLast == nil || dLast == nil {
			t.Fatalf("%s: via the gateway %q %q %v, direct %q %q %v", c.name, vText, vThoughts, vCalls, dText, dThoughts, dCalls)
		}
		vu, du := vLast.UsageMetadata, dLast.UsageMetadata
		if vu.PromptTokenCount != du.PromptTokenCount || vu.CandidatesTokenCount != du.CandidatesTokenCount || vu.ThoughtsTokenCount != du.ThoughtsTokenCount {
			t.Fatalf("%s: usage via the gateway %+v, direct %+v", c.name, vu, du)
		}
		e := s.newEvent(before)
		want := usage.Tokens{PromptTokens: int64(du.PromptTokenCount), CachedTokens: int64(du.CachedContentTokenCount),
			CompletionTokens: int64(du.CandidatesTokenCount + du.ThoughtsTokenCount), ReasoningTokens: int64(du.ThoughtsTokenCount)}
		if e.Usage != want || e.UsageSource != usage.SourceUpstream || !strings.HasPrefix(e.Endpoint, "/gemini/"+c.version+"/") {
			t.Fatalf("%s: event %+v, want usage %+v at /gemini/%s/", c.name, e.Event, want, c.version)
		}
	}
}
