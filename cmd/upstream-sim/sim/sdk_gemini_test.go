package sim_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genai"
)

// TestGeminiSDK checks that the official Go SDK parses the simulator's
// streamed and non-streamed generateContent responses and finds the usage.
func TestGeminiSDK(t *testing.T) {
	s, srv := start(t)
	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey: "x", Backend: genai.BackendGeminiAPI, HTTPClient: srv.Client(),
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	// prompt 3 + (4+2) + (4+4) = 17, 8 cached; 10 tokens: 5 thoughts, 5 text.
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText("be brief", genai.RoleUser),
		MaxOutputTokens:   10,
		ThinkingConfig:    &genai.ThinkingConfig{IncludeThoughts: true},
		HTTPOptions:       &genai.HTTPOptions{Headers: http.Header{"X-Sim-Chunks": {"2"}}},
	}
	var text, thought string
	var last *genai.GenerateContentResponse
	chunks := 0
	for resp, err := range client.Models.GenerateContentStream(ctx, "sim-pro", genai.Text("one two three four"), cfg) {
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.Candidates[0].Content.Parts {
			if p.Thought {
				thought += p.Text
			}
		}
		text += resp.Text()
		last = resp
		chunks++
	}
	five := strings.Repeat("tok ", 5)
	if chunks != 3 || last == nil || text != five || thought != five {
		t.Fatalf("%d chunks, text %q, thought %q", chunks, text, thought)
	}
	um := last.UsageMetadata
	if um.PromptTokenCount != 17 || um.CachedContentTokenCount != 8 || um.CandidatesTokenCount != 5 ||
		um.ThoughtsTokenCount != 5 || um.TotalTokenCount != 27 || last.Candidates[0].FinishReason != genai.FinishReasonMaxTokens ||
		last.ModelVersion != "sim-pro" {
		t.Errorf("last chunk %+v usage %+v", last, um)
	}

	res, err := client.Models.GenerateContent(ctx, "sim-pro", genai.Text("one two three four"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != five || res.UsageMetadata.TotalTokenCount != 27 || res.UsageMetadata.ThoughtsTokenCount != 5 ||
		res.UsageMetadata.CachedContentTokenCount != 8 || res.Candidates[0].FinishReason != genai.FinishReasonMaxTokens {
		t.Errorf("non-streamed %+v usage %+v", res, res.UsageMetadata)
	}

	// The raw error body after a chunk reaches the SDK as an APIError.
	cfg.HTTPOptions = &genai.HTTPOptions{Headers: http.Header{"X-Sim-Fault": {"error_after:1"}}}
	got := 0
	var streamErr error
	for _, err := range client.Models.GenerateContentStream(ctx, "sim-pro", genai.Text("hi"), cfg) {
		if err != nil {
			streamErr = err
			break
		}
		got++
	}
	if apiErr, ok := errors.AsType[genai.APIError](streamErr); !ok || apiErr.Code != 503 || apiErr.Status != "UNAVAILABLE" || got != 2 {
		t.Errorf("error_after: %d chunks, error %v", got, streamErr)
	}
	// sim_status comes back as an APIError with Gemini's envelope.
	cfg.HTTPOptions = &genai.HTTPOptions{Headers: http.Header{"X-Sim-Status": {"429"}}}
	_, err = client.Models.GenerateContent(ctx, "sim-pro", genai.Text("hi"), cfg)
	if apiErr, ok := errors.AsType[genai.APIError](err); !ok || apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" {
		t.Errorf("sim_status: %v", err)
	}
	st := waitStats(t, s, 4)
	if g := st.ByProtocol.Gemini.Requests; g.OK != 2 || g.StreamError != 1 || g.Status != 1 || g.Total != 4 {
		t.Errorf("stats %+v", st)
	}
}
