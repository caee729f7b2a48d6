package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// batchGemini is a scripted Gemini upstream for embeddings: it refuses a
// batchEmbedContents of more than 100 requests as Gemini does (400
// INVALID_ARGUMENT), answers each input "input N ..." with the embedding
// [N], counts its calls, and answers the call numbered failAt (from 1) with
// a 503.
type batchGemini struct {
	mu     sync.Mutex
	calls  int
	sizes  []int
	failAt int
	// shortAt is the call whose batch answers one embedding fewer than
	// its inputs (0: none).
	shortAt int
}

func (g *batchGemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Requests []struct {
			Content struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"requests"`
		Content *struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	g.mu.Lock()
	g.calls++
	call := g.calls
	g.sizes = append(g.sizes, len(req.Requests))
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	value := func(text string) string {
		var n int
		_, _ = fmt.Sscanf(text, "input %d", &n)
		return fmt.Sprintf(`{"values":[%d,0.5]}`, n)
	}
	switch {
	case call == g.failAt:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`))
	case strings.HasSuffix(r.URL.Path, ":embedContent") && req.Content != nil:
		_, _ = fmt.Fprintf(w, `{"embedding":%s}`, value(req.Content.Parts[0].Text))
	case len(req.Requests) > 100:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":400,"message":"* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch","status":"INVALID_ARGUMENT"}}`))
	default:
		var vals []string
		for _, q := range req.Requests {
			vals = append(vals, value(q.Content.Parts[0].Text))
		}
		if call == g.shortAt {
			vals = vals[1:]
		}
		_, _ = fmt.Fprintf(w, `{"embeddings":[%s]}`, strings.Join(vals, ","))
	}
}

func batchStack(t *testing.T, g *batchGemini) (*stack, openai.Client) {
	t.Helper()
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "batch-gemini", Type: "gemini", BaseURL: srv.URL + "/v1beta"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "gemini-emb", Deployments: []gateway.DeploymentConfig{
			{Name: "batch-gemini", Provider: "batch-gemini", UpstreamModel: "text-embedding-004"}}})
		c.Retry.MaxAttempts = 1
	})
	return st, openai.NewClient(option.WithBaseURL(st.url+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
}

func embedInputs(n int) []string {
	in := make([]string, n)
	for i := range in {
		in[i] = fmt.Sprintf("input %d of a request larger than one Gemini batch", i)
	}
	return in
}

// promptEstimate is what the gateway bills, estimated, for the inputs:
// the sum of each one's usage embedded alone (each input is embedded on
// its own, so the estimate counts each on its own).
func promptEstimate(t *testing.T, st *stack, c openai.Client, inputs []string) int64 {
	t.Helper()
	var sum int64
	for _, in := range inputs {
		var resp *http.Response
		r, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemini-emb",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(in)}}, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Usage.PromptTokens != r.Usage.PromptTokens || e.Usage.PromptTokens == 0 {
			t.Fatalf("control: event %+v, answer's usage %+v", e.Usage, r.Usage)
		}
		sum += r.Usage.PromptTokens
	}
	return sum
}

// TestGeminiEmbeddingsEstimateEachInput: Gemini reports no usage for
// embeddings, so the estimate is the bill; it counted an array's inputs
// joined by newlines, a token more an input: 1,000 inputs of one token
// each were billed 1,999 (a failover review: 200,000 one-letter inputs,
// 399,999). Each input is embedded alone, and counted so: 1,000.
func TestGeminiEmbeddingsEstimateEachInput(t *testing.T) {
	st, c := batchStack(t, &batchGemini{})
	inputs := make([]string, 1000)
	for i := range inputs {
		inputs[i] = "a"
	}
	var resp *http.Response
	if _, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemini-emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}}, option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if e := st.sink.event(t, resp.Header.Get("X-Request-Id")); e.Usage.PromptTokens != 1000 || e.UsageSource != usage.SourceEstimated {
		t.Fatalf("1,000 one-token inputs: event %s %+v; want 1,000 prompt tokens, estimated", e.UsageSource, e.Usage)
	}
}

// OpenAI's embeddings API takes up to 2048 inputs in one request; Gemini's
// batchEmbedContents at most 100. The gateway sent every input in one
// batch, so 250 inputs on a Gemini deployment got Gemini's 400. It sends
// them in batches of at most 100, in order, and answers them as one: 250
// embeddings, each at its index, one usage event billing the whole input.
func TestGeminiEmbeddingsOverOneBatch(t *testing.T) {
	g := &batchGemini{}
	st, c := batchStack(t, g)
	inputs := embedInputs(250)
	var resp *http.Response
	r, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemini-emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatalf("250 inputs: %v", err)
	}
	if len(r.Data) != len(inputs) {
		t.Fatalf("%d embeddings, want %d", len(r.Data), len(inputs))
	}
	for i, d := range r.Data {
		if d.Index != int64(i) || len(d.Embedding) != 2 || d.Embedding[0] != float64(i) {
			t.Fatalf("embedding %d: index %d, values %v; want index %d, values [%d 0.5]", i, d.Index, d.Embedding, i, i)
		}
	}
	g.mu.Lock()
	sizes := fmt.Sprint(g.sizes)
	g.mu.Unlock()
	if sizes != "[100 100 50]" {
		t.Errorf("upstream batches %s, want [100 100 50]", sizes)
	}
	id := resp.Header.Get("X-Request-Id")
	e := st.sink.event(t, id)
	want := promptEstimate(t, st, c, inputs)
	if evs := st.sink.eventsOf(id); len(evs) != 1 || e.Status != usage.StatusOK || e.NotCharged ||
		e.Usage.PromptTokens != want || r.Usage.PromptTokens != want || r.Usage.TotalTokens != want {
		t.Errorf("events %+v, answer's usage %+v: want one ok event billing the whole input, %d tokens", evs, r.Usage, want)
	}
}

// A batch that fails after others were embedded fails the request (no
// partial answer), and its one event bills what the provider embedded and
// charged for: the inputs of the batches before it, estimated.
func TestGeminiEmbeddingsBatchFailsMidway(t *testing.T) {
	g := &batchGemini{failAt: 2}
	st, c := batchStack(t, g)
	inputs := embedInputs(250)
	var resp *http.Response
	_, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemini-emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}}, option.WithResponseInto(&resp))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("err %v, want the upstream's 503", err)
	}
	g.mu.Lock()
	calls := g.calls
	g.mu.Unlock()
	if calls != 2 {
		t.Errorf("%d upstream calls, want 2: none after the batch that failed", calls)
	}
	id := ae.Response.Header.Get("X-Request-Id")
	e := st.sink.event(t, id)
	want := promptEstimate(t, st, c, inputs[:100])
	if evs := st.sink.eventsOf(id); len(evs) != 1 || e.Status != usage.StatusUpstreamError || e.NotCharged || e.Usage.PromptTokens != want {
		t.Errorf("events %+v: want one upstream_error event billing the first batch's %d tokens", evs, want)
	}
}

// A batch that fails after others were embedded, with another attempt to
// follow: the attempt's event is the operator's cost (not charged, billing
// what the provider embedded), and the next attempt sends every batch and
// is charged the whole input, once.
func TestGeminiEmbeddingsBatchFailsOver(t *testing.T) {
	bad, good := &batchGemini{failAt: 2}, &batchGemini{}
	badSrv, goodSrv := httptest.NewServer(bad), httptest.NewServer(good)
	t.Cleanup(badSrv.Close)
	t.Cleanup(goodSrv.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "bad-gemini", Type: "gemini", BaseURL: badSrv.URL + "/v1beta"},
			gateway.ProviderConfig{Name: "good-gemini", Type: "gemini", BaseURL: goodSrv.URL + "/v1beta"})
		c.Models = append(c.Models,
			gateway.ModelConfig{Name: "gemini-emb", Deployments: []gateway.DeploymentConfig{
				{Name: "bad-gemini", Provider: "bad-gemini", UpstreamModel: "text-embedding-004"}}, Fallbacks: []string{"gemini-emb-2"}},
			gateway.ModelConfig{Name: "gemini-emb-2", Deployments: []gateway.DeploymentConfig{
				{Name: "good-gemini", Provider: "good-gemini", UpstreamModel: "text-embedding-004"}}})
		c.Retry.MaxAttempts = 2
	})
	c := openai.NewClient(option.WithBaseURL(st.url+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	inputs := embedInputs(250)
	var resp *http.Response
	r, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemini-emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatalf("250 inputs: %v", err)
	}
	if len(r.Data) != len(inputs) || r.Data[249].Index != 249 || r.Data[249].Embedding[0] != 249 {
		t.Fatalf("%d embeddings, want %d in order", len(r.Data), len(inputs))
	}
	bad.mu.Lock()
	badCalls := bad.calls
	bad.mu.Unlock()
	good.mu.Lock()
	goodSizes := fmt.Sprint(good.sizes)
	good.mu.Unlock()
	if badCalls != 2 || goodSizes != "[100 100 50]" {
		t.Errorf("failing deployment called %d times (want 2), the next one got batches %s (want [100 100 50])", badCalls, goodSizes)
	}
	id := resp.Header.Get("X-Request-Id")
	e := st.sink.event(t, id)
	evs := st.sink.eventsOf(id)
	first, whole := promptEstimate(t, st, c, inputs[:100]), promptEstimate(t, st, c, inputs)
	charged, retired := 0, 0
	for _, ev := range evs {
		switch {
		case !ev.NotCharged && ev.Status == usage.StatusOK && ev.Usage.PromptTokens == whole:
			charged++
		case ev.NotCharged && ev.Status == usage.StatusUpstreamError && ev.Usage.PromptTokens == first:
			retired++
		}
	}
	if len(evs) != 2 || charged != 1 || retired != 1 || e.Usage.PromptTokens != whole || r.Usage.PromptTokens != whole {
		t.Errorf("events %+v, answer's usage %+v: want the failed attempt's (not charged, %d tokens) and one charged the whole input (%d)",
			evs, r.Usage, first, whole)
	}
}

// TestGeminiEmbeddingsBatchAnswersTooFew (a review): a batch that answered
// one embedding fewer than its inputs was joined all the same, and every
// later embedding was labelled with the index of the input before its own:
// 249 embeddings for 250 inputs, the last labelled 248, a client matching
// vectors to texts by index got wrong ones. It is now the upstream's error
// (502), and the inputs embedded are billed.
func TestGeminiEmbeddingsBatchAnswersTooFew(t *testing.T) {
	g := &batchGemini{shortAt: 1}
	st, c := batchStack(t, g)
	_, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemini-emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: embedInputs(250)}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadGateway || !strings.Contains(ae.Message, "99 embeddings for batch 1 of 3, which has 100 inputs") {
		t.Fatalf("err %v, want a 502 naming the batch that answered too few", err)
	}
	e := st.sink.event(t, ae.Response.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusUpstreamError || e.Usage.PromptTokens <= 0 {
		t.Errorf("event %s usage %+v: want upstream_error billing the inputs embedded", e.Status, e.Usage)
	}
}
