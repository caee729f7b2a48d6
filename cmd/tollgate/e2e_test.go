package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// simProCost is the exact cost of sim-pro usage at the demo prices (2.50
// input, 1.25 cached input, 10.00 output per million tokens), in 1e-12 USD.
func simProCost(u sim.Usage) int64 {
	return (u.PromptTokens-u.CachedTokens)*2_500_000 + u.CachedTokens*1_250_000 + u.CompletionTokens*10_000_000
}

// TestEndToEndOpenAISDK drives the whole pipeline with the official OpenAI
// Go SDK: streamed with and without include_usage, and not streamed. What the
// client gets must be what the upstream sent, and the ledger must hold the
// upstream's usage and its exact cost.
func TestEndToEndOpenAISDK(t *testing.T) {
	s := newStack(t, nil)
	client := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(0))
	ctx := context.Background()
	const maxTokens = 24
	want, err := sim.ExpectedUsage([]byte(`{"model":"sim-pro","max_tokens":24,"messages":[
		{"role":"system","content":"be brief"},{"role":"user","content":"Say hello to the ledger"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	content := strings.Repeat("tok ", int(want.CompletionTokens-want.ReasoningTokens))
	base := openai.ChatCompletionNewParams{
		Model: "sim-pro",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("be brief"), openai.UserMessage("Say hello to the ledger"),
		},
		MaxTokens:        openai.Int(maxTokens),
		Metadata:         shared.Metadata{"sim_chunks": "5"},
		SafetyIdentifier: openai.String("end-user-7"),
	}
	for _, tc := range []struct {
		name                 string
		stream, includeUsage bool
	}{
		{"stream with include_usage", true, true},
		{"stream without include_usage", true, false},
		{"not streamed", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			params := base
			var got openai.ChatCompletion
			if tc.stream {
				if tc.includeUsage {
					params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				}
				stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp))
				var acc openai.ChatCompletionAccumulator
				usageChunks := 0
				for stream.Next() {
					c := stream.Current()
					if c.JSON.Usage.Valid() && len(c.Choices) == 0 {
						usageChunks++
					}
					if !acc.AddChunk(c) {
						t.Fatalf("the SDK's accumulator rejected a chunk: %s", c.RawJSON())
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{true: 1, false: 0}[tc.includeUsage]; usageChunks != want {
					t.Fatalf("%d usage chunks, want %d", usageChunks, want)
				}
				got = acc.ChatCompletion
			} else {
				res, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
				if err != nil {
					t.Fatal(err)
				}
				got = *res
			}
			ended := time.Now()
			if len(got.Choices) != 1 || got.Choices[0].Message.Content != content || got.Choices[0].FinishReason != "length" {
				t.Fatalf("completion = %+v, want content %q finishing with length", got.Choices, content)
			}
			if tc.includeUsage || !tc.stream {
				if u := got.Usage; u.PromptTokens != want.PromptTokens || u.CompletionTokens != want.CompletionTokens {
					t.Fatalf("client usage = %+v, want %+v", u, want)
				}
			}
			e := s.event(resp.Header.Get("X-Request-Id"))
			t.Logf("event visible in the ledger %s after the response ended", time.Since(ended).Round(time.Millisecond))
			wantUsage := usage.Tokens{PromptTokens: want.PromptTokens, CachedTokens: want.CachedTokens,
				CompletionTokens: want.CompletionTokens, ReasoningTokens: want.ReasoningTokens}
			if e.Usage != wantUsage || e.UsageSource != usage.SourceUpstream || e.Status != usage.StatusOK ||
				e.Stream != tc.stream || e.FinishReason != "length" || e.ServedModel != "sim-pro" || e.CustomerID != s.customerID {
				t.Fatalf("ledger event = %+v, want usage %+v from upstream", e, wantUsage)
			}
			wantCost, _ := ledger.FormatE12(fmt.Sprint(simProCost(want)))
			if e.Cost != wantCost || e.Currency != "USD" || e.PriceID == 0 {
				t.Fatalf("cost = %s %s (price %d), want %s USD", e.Cost, e.Currency, e.PriceID, wantCost)
			}
			if e.EndUser != "end-user-7" || len(e.Metadata) != 1 || e.Metadata["sim_chunks"] != "5" {
				t.Fatalf("attribution = %q %v, want end-user-7 tagged sim_chunks=5", e.EndUser, e.Metadata)
			}
		})
	}
	// The customer sees its requests with its own key, and its usage by end user.
	var requests ledger.RequestPage
	s.customerDo("GET", "/v1/requests?end_user=end-user-7", &requests)
	var byUser ledger.UsagePage
	s.customerDo("GET", "/v1/usage?group_by=end_user", &byUser)
	if len(requests.Data) != 3 || len(byUser.Data) != 1 || byUser.Data[0].EndUser != "end-user-7" || byUser.Data[0].Requests != 3 {
		t.Fatalf("requests %d, usage by end user %+v; want 3 of end-user-7", len(requests.Data), byUser.Data)
	}
	// The admin usage query sums the three requests exactly.
	var usage struct {
		Data []ledger.UsageRow `json:"data"`
	}
	s.adminDo("GET", "/admin/v1/usage?group_by=model&customer_id="+s.customerID, "", http.StatusOK, &usage)
	wantCost, _ := ledger.FormatE12(fmt.Sprint(3 * simProCost(want)))
	if len(usage.Data) != 1 || usage.Data[0].Requests != 3 || usage.Data[0].PromptTokens != 3*want.PromptTokens ||
		usage.Data[0].CachedTokens != 3*want.CachedTokens || usage.Data[0].ReasoningTokens != 3*want.ReasoningTokens ||
		usage.Data[0].Cost != wantCost || usage.Data[0].Model != "sim-pro" {
		t.Fatalf("usage = %+v, want 3 requests costing %s", usage.Data, wantCost)
	}
}

// TestStreamWithoutIncludeUsageHasNoUsage checks the raw bytes: a client
// that did not ask for usage gets no usage key at all, and still [DONE];
// the ledger gets the usage anyway.
func TestStreamWithoutIncludeUsageHasNoUsage(t *testing.T) {
	s := newStack(t, nil)
	resp := s.post("/v1/chat/completions", `{"model":"sim/sim-small","stream":true,"max_tokens":7,"messages":[{"role":"user","content":"hi there"}]}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if strings.Contains(string(body), `"usage"`) || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("stream = %s\nwant no usage and a final [DONE]", body)
	}
	if n := strings.Count(string(body), "data: "); n != 7+3 { // role, 7 tokens, finish, [DONE]
		t.Fatalf("%d data frames, want 10:\n%s", n, body)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	// "sim/sim-small" routes by prefix to the table's sim-small, priced as such.
	if e.Model != "sim-small" || e.Usage.CompletionTokens != 7 || e.Usage.PromptTokens != 3+4+2 || e.UsageSource != usage.SourceUpstream || e.PriceID == 0 {
		t.Fatalf("event = %+v", e)
	}
}
