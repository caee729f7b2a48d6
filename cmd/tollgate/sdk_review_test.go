package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// scripted is an upstream that answers each model with a canned response.
type scripted struct {
	mu   sync.Mutex
	resp map[string]cannedResp
	hits atomic.Int64
	last atomic.Value // last request body
}

type cannedResp struct {
	status  int
	headers map[string]string
	body    string
	ctype   string
}

func (sc *scripted) set(model string, c cannedResp) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.resp == nil {
		sc.resp = map[string]cannedResp{}
	}
	sc.resp[model] = c
}

func (sc *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sc.hits.Add(1)
	b, _ := io.ReadAll(r.Body)
	sc.last.Store(string(b))
	model := ""
	if i := strings.Index(string(b), `"model":"`); i >= 0 {
		rest := string(b)[i+9:]
		model = rest[:strings.IndexByte(rest, '"')]
	}
	if _, rest, ok := strings.Cut(r.URL.Path, "/models/"); ok {
		model, _, _ = strings.Cut(rest, ":")
	}
	sc.mu.Lock()
	c, ok := sc.resp[model]
	sc.mu.Unlock()
	if !ok {
		http.Error(w, "no script for "+model, 404)
		return
	}
	if c.ctype == "" {
		c.ctype = "application/json"
		if strings.HasPrefix(c.body, "data:") || strings.HasPrefix(c.body, "event:") {
			c.ctype = "text/event-stream"
		}
	}
	w.Header().Set("Content-Type", c.ctype)
	for k, v := range c.headers {
		w.Header().Set(k, v)
	}
	if c.status == 0 {
		c.status = 200
	}
	w.WriteHeader(c.status)
	_, _ = io.WriteString(w, c.body)
}

func scriptedStack(t *testing.T) (*stack, *scripted) {
	sc := &scripted{}
	srv := httptest.NewServer(sc)
	t.Cleanup(srv.Close)
	s := newStack(t, func(c *fileConfig) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "fake", Type: "openai", BaseURL: srv.URL + "/v1", APIKey: "k", PrefixRoutes: "all"},
			gateway.ProviderConfig{Name: "fake-anthropic", Type: "anthropic", BaseURL: srv.URL + "/v1", APIKey: "k", PrefixRoutes: "all"},
			gateway.ProviderConfig{Name: "fake-gemini", Type: "gemini", BaseURL: srv.URL + "/v1beta", APIKey: "k", PrefixRoutes: "all"},
		)
	})
	return s, sc
}

func oaClient(s *stack, retries int) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(retries))
	return &c
}

// TestAnthropicSDKErrorCarriesRequestID: the Anthropic SDK reads a
// request's id from the "request-id" response header (Error.RequestID,
// printed in every error as "(Request-ID: ...)", the id a developer quotes
// to support). Through the gateway that header was empty, on the
// gateway's own refusals, on relayed upstream errors and on errors in a
// stream: the gateway sends its id only as X-Request-Id, and drops the
// upstream's request-id. The id the SDK shows must be the gateway's
// request id, the ledger event's.
func TestAnthropicSDKErrorCarriesRequestID(t *testing.T) {
	s, sc := scriptedStack(t)
	sc.set("limited", cannedResp{status: 429, headers: map[string]string{"request-id": "req_upstream", "retry-after": "1"},
		body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`})
	sc.set("overloaded", cannedResp{body: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"})
	params := func(model string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 16,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	}
	for _, c := range []struct{ name, key, model string }{
		{"the gateway's 401", "sk-wrong", "fake-anthropic/limited"},
		{"an upstream 429", s.secret, "fake-anthropic/limited"},
		{"an error event in a stream", s.secret, "fake-anthropic/overloaded"},
	} {
		client := anthropic.NewClient(aoption.WithBaseURL(s.gateway+"/anthropic"), aoption.WithAPIKey(c.key), aoption.WithMaxRetries(0))
		var resp *http.Response
		var err error
		if strings.Contains(c.name, "stream") {
			st := client.Messages.NewStreaming(context.Background(), params(c.model), aoption.WithResponseInto(&resp))
			for st.Next() {
			}
			err = st.Err()
		} else {
			_, err = client.Messages.New(context.Background(), params(c.model), aoption.WithResponseInto(&resp))
		}
		var ae *anthropic.Error
		if !errors.As(err, &ae) {
			t.Fatalf("%s: %T %v, want an *anthropic.Error", c.name, err, err)
		}
		id := ae.Response.Header.Get("X-Request-Id")
		if id == "" || ae.RequestID != id {
			t.Errorf("%s: the SDK's RequestID is %q, the gateway's request id %q (error: %v)", c.name, ae.RequestID, id, err)
		}
	}
}

// TestOpenAISDKEmbeddingsBase64OnGemini: a client asking for
// encoding_format "base64" (openai-node and openai-python ask for it by
// default, and decode each embedding from base64 little-endian float32)
// must get base64 strings. Translated to Gemini, whose embeddings come
// as number arrays, the gateway answered number arrays whatever the client
// asked: openai-node's Buffer.from(array, "base64") decodes them into
// garbage vectors, silently.
func TestOpenAISDKEmbeddingsBase64OnGemini(t *testing.T) {
	s, sc := scriptedStack(t)
	sc.set("g-emb", cannedResp{body: `{"embeddings":[{"values":[0.5,-2]},{"values":[0.25,1]}]}`})
	r, err := oaClient(s, 0).Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "fake-gemini/g-emb",
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{0.5, -2}, {0.25, 1}}
	if len(r.Data) != len(want) {
		t.Fatalf("%d embeddings, want %d", len(r.Data), len(want))
	}
	for i, d := range r.Data {
		var b64 string
		if err := json.Unmarshal([]byte(d.JSON.Embedding.Raw()), &b64); err != nil {
			t.Fatalf("embedding %d is %s, not the base64 string the client asked for", i, d.JSON.Embedding.Raw())
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != 4*len(want[i]) {
			t.Fatalf("embedding %d: %q is not %d float32s in base64 (%v)", i, b64, len(want[i]), err)
		}
		for j, w := range want[i] {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); got != w {
				t.Fatalf("embedding %d value %d = %v, want %v", i, j, got, w)
			}
		}
	}
}

// TestOpenAISDKNonStreamedEstimateShown: an OpenAI-compatible upstream
// that reports no usage on a non-streamed chat completion is billed an
// estimate, as a stream is. A non-streamed answer always carries usage in
// OpenAI's API (the SDK's ChatCompletion.Usage), and the gateway writes
// its estimate into the stream's usage chunk and into an embeddings
// answer; here the client was told nothing (Usage all zero) while the
// ledger billed the estimate.
func TestOpenAISDKNonStreamedEstimateShown(t *testing.T) {
	s, sc := scriptedStack(t)
	sc.set("no-usage", cannedResp{body: `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"The quick brown fox jumps over the lazy dog."},"finish_reason":"stop"}]}`})
	var resp *http.Response
	r, err := oaClient(s, 0).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "fake/no-usage",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say something")}}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens == 0 {
		t.Fatalf("event %+v, want an estimate", e.Event)
	}
	if u := r.Usage; u.PromptTokens != e.Usage.PromptTokens || u.CompletionTokens != e.Usage.CompletionTokens || u.TotalTokens != e.Usage.Total() {
		t.Fatalf("the client was told %d+%d=%d tokens (%s), the ledger billed %+v", u.PromptTokens, u.CompletionTokens, u.TotalTokens, r.RawJSON(), e.Usage)
	}
}

// TestOpenAISDKResponsesNonStreamedEstimateShown: as
// TestOpenAISDKNonStreamedEstimateShown, on POST /v1/responses: a
// response without usage is billed an estimate, and the client, whose
// Response.Usage always has OpenAI's figures, is told 0 input and 0 output
// tokens.
func TestOpenAISDKResponsesNonStreamedEstimateShown(t *testing.T) {
	s, sc := scriptedStack(t)
	sc.set("resp-no-usage", cannedResp{body: `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"m1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"The quick brown fox jumps over the lazy dog.","annotations":[]}]}]}`})
	var resp *http.Response
	r, err := oaClient(s, 0).Responses.New(context.Background(), responses.ResponseNewParams{Model: "fake/resp-no-usage",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("say something")}}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.UsageSource != usage.SourceEstimated || e.Usage.CompletionTokens == 0 {
		t.Fatalf("event %+v, want an estimate", e.Event)
	}
	if u := r.Usage; u.InputTokens != e.Usage.PromptTokens || u.OutputTokens != e.Usage.CompletionTokens {
		t.Fatalf("the client was told %d input and %d output tokens, the ledger billed %+v", u.InputTokens, u.OutputTokens, e.Usage)
	}
}
