package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger"
)

// routingStack is the whole pipeline with models of several deployments,
// each deployment a base URL of its own on upstream-sim (/d/{name}/), so
// that the simulator counts what each one served:
//
//	smart         openai: east (weight 3), west (weight 1); falls back to cheap
//	cheap         openai: spare
//	claude-smart  anthropic: a-east (weight 1000, so first), a-west (weight 1)
//	gemini-smart  gemini: g-east, g-west
func routingStack(t *testing.T) *stack {
	t.Helper()
	return newStack(t, func(c *fileConfig) {
		base := c.Providers[0].BaseURL[:len(c.Providers[0].BaseURL)-len("/v1")]
		add := func(name, typ, suffix string) {
			c.Providers = append(c.Providers, gateway.ProviderConfig{Name: name, Type: typ, BaseURL: base + "/d/" + name + suffix, APIKey: "k"})
		}
		for _, n := range []string{"east", "west", "spare"} {
			add(n, "openai", "/v1")
		}
		add("a-east", "anthropic", "/v1")
		add("a-west", "anthropic", "/v1")
		add("g-east", "gemini", "/v1beta")
		add("g-west", "gemini", "/v1beta")
		dep := func(name string, w int) gateway.DeploymentConfig {
			return gateway.DeploymentConfig{Name: name, Provider: name, UpstreamModel: "sim-small", Weight: w}
		}
		c.Models = append(c.Models,
			gateway.ModelConfig{Name: "smart", Deployments: []gateway.DeploymentConfig{dep("east", 3), dep("west", 1)}, Fallbacks: []string{"cheap"}},
			gateway.ModelConfig{Name: "cheap", Deployments: []gateway.DeploymentConfig{dep("spare", 1)}},
			gateway.ModelConfig{Name: "claude-smart", Deployments: []gateway.DeploymentConfig{dep("a-east", 1000), dep("a-west", 1)}},
			gateway.ModelConfig{Name: "gemini-smart", Deployments: []gateway.DeploymentConfig{dep("g-east", 1), dep("g-west", 1)}})
		c.Retry.Cooldown = time.Hour // a deployment that failed stays out for the test
	})
}

func mustFaults(t *testing.T, s *stack, name string, f sim.Faults) {
	t.Helper()
	if err := s.sim.SetFaults(name, f); err != nil {
		t.Fatal(err)
	}
}

// usageByDeployment is the admin API's usage grouped by deployment.
func usageByDeployment(s *stack) map[string]ledger.UsageRow {
	var page ledger.UsagePage
	s.adminDo("GET", "/admin/v1/usage?group_by=deployment", "", http.StatusOK, &page)
	out := map[string]ledger.UsageRow{}
	for _, r := range page.Data {
		out[r.Deployment] = r
	}
	return out
}

// notCharged is r's attempts not charged, 0 for a row with none given.
func notCharged(r ledger.UsageRow) int64 {
	if r.NotChargedRequests == nil {
		return 0
	}
	return *r.NotChargedRequests
}

// TestRoutingSDKFailover: the three official SDKs, with retries off, get
// answers while deployments fail with 429 and 5xx before their first byte;
// the failed deployments rest (cool-down), and the ledger's attempts per
// deployment (charged or not) equal what upstream-sim served.
func TestRoutingSDKFailover(t *testing.T) {
	s := routingStack(t)
	ctx := context.Background()

	// OpenAI: both deployments of smart fail once, one with 429, one with
	// 503: the request goes east, west and then to the fallback, cheap.
	mustFaults(t, s, "east", sim.Faults{FailNext: 1, Status: 429})
	mustFaults(t, s, "west", sim.Faults{FailNext: 1, Status: 503})
	oc := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(0))
	var raw *http.Response
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "smart",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	served := s.event(raw.Header.Get("X-Request-Id"))
	if served.Model != "cheap" || served.Deployment != "spare" || served.Attempt != 3 || served.Usage.PromptTokens != cc.Usage.PromptTokens {
		t.Fatalf("served %+v (SDK usage %+v)", served.Event, cc.Usage)
	}
	// Cool-down: east and west rest for an hour; smart is served by cheap, first try.
	for range 3 {
		if _, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "smart",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("again")}}); err != nil {
			t.Fatal(err)
		}
	}

	// Anthropic: a-east fails throughout with 529 (overloaded); every
	// request is served by a-west, and a-east, tried first by its weight
	// (999 times in 1000), sees one: then it rests.
	mustFaults(t, s, "a-east", sim.Faults{FailAll: true, Status: 529})
	ac := anthropic.NewClient(aoption.WithBaseURL(s.gateway+"/anthropic"), aoption.WithAPIKey(s.secret), aoption.WithMaxRetries(0))
	for range 4 {
		msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-smart", MaxTokens: 8,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		if err != nil || msg.Usage.OutputTokens != 8 {
			t.Fatalf("anthropic: %+v, %v", msg.Usage, err)
		}
	}

	// Gemini: g-east fails once with 500, streamed; the stream comes from g-west.
	mustFaults(t, s, "g-east", sim.Faults{FailNext: 1, Status: 500})
	mustFaults(t, s, "g-west", sim.Faults{FailNext: 1, Status: 429})
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: s.secret, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.gateway + "/gemini"}})
	if err != nil {
		t.Fatal(err)
	}
	// Both fail once: the first request gets the second one's 429 (no
	// fallback), in Gemini's envelope; the next is served (the rest ended,
	// cool-downs notwithstanding, since nothing else serves the model).
	var apiErr genai.APIError
	for _, err := range gc.Models.GenerateContentStream(ctx, "gemini-smart", genai.Text("hi"), &genai.GenerateContentConfig{MaxOutputTokens: 6}) {
		if err != nil && !errors.As(err, &apiErr) {
			t.Fatalf("gemini: %v", err)
		}
		if err != nil {
			break
		}
	}
	if apiErr.Code != 429 && apiErr.Code != 500 {
		t.Fatalf("gemini: first request got %+v, want the last deployment's 429 or 500", apiErr)
	}
	var text string
	for resp, err := range gc.Models.GenerateContentStream(ctx, "gemini-smart", genai.Text("hi"), &genai.GenerateContentConfig{MaxOutputTokens: 6}) {
		if err != nil {
			t.Fatalf("gemini: %v", err)
		}
		text += resp.Text()
	}
	if text == "" {
		t.Fatal("gemini: no text")
	}

	// The ground truth: what each deployment served (every request it
	// ended) equals the ledger's attempts on it, and their tokens.
	want := s.simStats().ByDeployment
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := usageByDeployment(s)
		mismatch := ""
		for name, c := range want {
			g := got[name]
			served := c.Requests.Total - c.Requests.BadRequest
			failed := c.Requests.Status
			if g.Requests != served || g.PromptTokens != c.PromptTokens || g.CompletionTokens != c.CompletionTokens {
				mismatch += fmt.Sprintf("\n%s: ledger %d requests, %d+%d tokens; sim %d, %d+%d", name, g.Requests,
					g.PromptTokens, g.CompletionTokens, served, c.PromptTokens, c.CompletionTokens)
			}
			// A failure is not charged, unless it was the request's last attempt.
			if notCharged(g) > failed {
				mismatch += fmt.Sprintf("\n%s: %d attempts not charged, %d failures", name, notCharged(g), failed)
			}
		}
		if mismatch == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger by deployment differs from upstream-sim:%s", mismatch)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e, w := want["east"].Requests, want["west"].Requests; e.Total != 1 || w.Total != 1 {
		t.Errorf("during their cool-down east saw %d, west %d requests; want 1 each", e.Total, w.Total)
	}
	if a := want["a-east"].Requests; a.Total != 1 || want["a-west"].Requests.OK != 4 {
		t.Errorf("a-east saw %d requests, a-west served %d; want 1 and 4", a.Total, want["a-west"].Requests.OK)
	}
	if n := notCharged(usageByDeployment(s)["spare"]); n != 0 {
		t.Errorf("spare: %d attempts not charged", n)
	}
	// The customer is charged once per request: 4 smart, 4 claude-smart, 2 gemini-smart.
	var mine ledger.UsagePage
	s.customerDo("GET", "/v1/usage?group_by=model", &mine)
	var requests int64
	for _, r := range mine.Data {
		requests += r.Requests
	}
	if requests != 10 {
		t.Errorf("the customer's usage counts %d requests, want 10 (one per request, attempts aside)", requests)
	}
}

// TestRoutingSDKNoRetryAfterFirstByte: a stream that dies after content
// reached the client is not retried: the SDK sees the error, the ledger
// has one charged event and no attempt.
func TestRoutingSDKNoRetryAfterFirstByte(t *testing.T) {
	s := routingStack(t)
	for _, d := range []string{"east", "west", "spare"} {
		mustFaults(t, s, d, sim.Faults{DieNext: 1, DieAfter: 2})
	}
	oc := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(0))
	var raw *http.Response
	stream := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "smart",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}, option.WithResponseInto(&raw))
	chunks := 0
	for stream.Next() {
		chunks++
	}
	if stream.Err() == nil {
		t.Fatal("the SDK saw no error from a stream that died")
	}
	e := s.event(raw.Header.Get("X-Request-Id"))
	if e.Attempt != 1 || e.Status != "upstream_error" || chunks == 0 {
		t.Fatalf("event %+v after %d chunks", e.Event, chunks)
	}
	st := s.simStats().ByDeployment
	if died := st["east"].Requests.Disconnected + st["west"].Requests.Disconnected + st["spare"].Requests.Disconnected; died != 1 {
		t.Fatalf("%d upstream requests died, want 1 (no retry)", died)
	}
	time.Sleep(200 * time.Millisecond)
	if n := notCharged(usageByDeployment(s)[e.Deployment]); n != 0 {
		t.Fatalf("%d attempts not charged", n)
	}
}

// TestDeploymentsExampleValidates: examples/deployments.yaml loads and
// validates, its deployments named and weighted as documented.
func TestDeploymentsExampleValidates(t *testing.T) {
	cfg, err := loadConfig("../../examples/deployments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	smart := cfg.Models[0]
	if len(smart.Deployments) != 2 || smart.Deployments[0].Name != "east/sim-pro" || smart.Deployments[0].Weight != 3 ||
		smart.Deployments[1].Name != "west" || smart.Fallbacks[0] != "cheap" || len(cfg.Models[1].Deployments) != 1 {
		t.Fatalf("models %+v", cfg.Models)
	}
	// Its failover must follow a hung deployment: with a budget no longer
	// than connect_timeout (30s by default), the hung deployment's 504 was
	// the answer and no other attempt started (docs/configuration.md,
	// retry.budget).
	for _, p := range cfg.Providers {
		connect := p.ConnectTimeout
		if connect <= 0 {
			connect = 30 * time.Second
		}
		if cfg.Retry.Budget <= connect {
			t.Errorf("retry.budget %s is not above provider %s's connect_timeout %s: a hung deployment is never followed by another", cfg.Retry.Budget, p.Name, connect)
		}
	}
}

// TestRoutingSDKModelRetrieve: openai-go's models.retrieve finds a model of
// the table, and gets a 404 for one that is not there.
func TestRoutingSDKModelRetrieve(t *testing.T) {
	s := routingStack(t)
	oc := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(0))
	m, err := oc.Models.Get(context.Background(), "smart")
	if err != nil || m.ID != "smart" || m.OwnedBy != "east" {
		t.Fatalf("%+v, %v", m, err)
	}
	var apiErr *openai.Error
	if _, err := oc.Models.Get(context.Background(), "nope"); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown model: %v", err)
	}
}

// TestRoutingSDKToolCall: a tool call answered by upstream-sim
// (sim_tool_call) reaches openai-go's accumulator whole, streamed through
// a model of several deployments, and is metered by the simulator's rules.
func TestRoutingSDKToolCall(t *testing.T) {
	s := routingStack(t)
	oc := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(0))
	var raw *http.Response
	stream := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "smart",
		MaxTokens: openai.Int(4), Metadata: map[string]string{"sim_tool_call": "1"},
		Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "lookup"})},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("find it")}}, option.WithResponseInto(&raw))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "lookup" || calls[0].Function.Arguments != `{"text":"tok tok tok tok "}` ||
		acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("accumulated %+v", acc.Choices)
	}
	if e := s.event(raw.Header.Get("X-Request-Id")); e.Usage.CompletionTokens != 4 || e.UsageSource != "upstream" || e.FinishReason != "tool_calls" {
		t.Fatalf("event %+v", e.Event)
	}
}
