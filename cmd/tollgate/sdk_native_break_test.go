package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestNativeSDKsGetTypedErrorWhenUpstreamBreaks: an upstream whose
// stream breaks mid-way (its connection reset) on a native route. The
// chat route ends such a stream with an error chunk; the native routes
// only reset the client's connection, so the SDKs reported a bare
// "unexpected EOF": the Anthropic SDK no *anthropic.Error, genai no
// APIError, the Responses client no "error" event, though each protocol
// has its own error event for a stream under way (what the gateway sends
// when it shuts down). The error event, in the route's shape, comes
// before the stream is broken off.
func TestNativeSDKsGetTypedErrorWhenUpstreamBreaks(t *testing.T) {
	heads := map[string]string{
		"a-break": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there\"}}\n\n",
		"r-break": "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"model\":\"m\",\"output\":[]}}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hello there\"}\n\n",
		"g-break": "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hello there\"}]},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":5,\"totalTokenCount\":5}}\r\n\r\n",
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		for model, head := range heads {
			if strings.Contains(r.URL.Path+string(b), model) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, head)
				http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler) // the connection breaks mid-stream
			}
		}
		http.Error(w, "no such model", http.StatusNotFound)
	}))
	t.Cleanup(up.Close)
	s := newStack(t, func(c *fileConfig) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "brk", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k", PrefixRoutes: "all"},
			gateway.ProviderConfig{Name: "brk-anthropic", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "k", PrefixRoutes: "all"},
			gateway.ProviderConfig{Name: "brk-gemini", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "k", PrefixRoutes: "all"},
		)
	})
	ctx := context.Background()
	failed := func(name, id string) {
		t.Helper()
		if e := s.event(id); e.Status != usage.StatusUpstreamError {
			t.Errorf("%s: event %s (%s), want upstream_error", name, e.Status, e.Error)
		}
	}

	t.Run("anthropic", func(t *testing.T) {
		client := anthropic.NewClient(aoption.WithBaseURL(s.gateway+"/anthropic"), aoption.WithAPIKey(s.secret), aoption.WithMaxRetries(0))
		var resp *http.Response
		st := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "brk-anthropic/a-break", MaxTokens: 16,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}, aoption.WithResponseInto(&resp))
		for st.Next() {
		}
		var ae *anthropic.Error
		if err := st.Err(); !errors.As(err, &ae) {
			t.Errorf("the SDK's error is %T %v, want an *anthropic.Error", err, err)
		}
		failed("anthropic", resp.Header.Get("X-Request-Id"))
	})
	t.Run("gemini", func(t *testing.T) {
		client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: s.secret, Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: s.gateway + "/gemini", APIVersion: "v1beta"}})
		if err != nil {
			t.Fatal(err)
		}
		before := s.newestID()
		var first error
		for _, err := range client.Models.GenerateContentStream(ctx, "brk-gemini/g-break", genai.Text("hi"), nil) {
			if err != nil {
				first = err
				break
			}
		}
		var ge genai.APIError
		if !errors.As(first, &ge) || ge.Code < 500 {
			t.Errorf("the SDK's first error is %T %v, want a genai.APIError with a 5xx code", first, first)
		}
		failed("gemini", s.newEvent(before).ID)
	})
	t.Run("responses", func(t *testing.T) {
		client := openai.NewClient(option.WithBaseURL(s.gateway+"/v1"), option.WithAPIKey(s.secret), option.WithMaxRetries(0))
		var resp *http.Response
		st := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "brk/r-break",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, option.WithResponseInto(&resp))
		var errEvent *responses.ResponseErrorEvent
		for st.Next() {
			if ev := st.Current(); ev.Type == "error" {
				e := ev.AsError()
				errEvent = &e
			}
		}
		if errEvent == nil || errEvent.Message == "" || st.Err() == nil {
			t.Errorf("error event %+v, stream error %v: want the Responses API's error event, then a broken stream", errEvent, st.Err())
		}
		failed("responses", resp.Header.Get("X-Request-Id"))
	})
}
