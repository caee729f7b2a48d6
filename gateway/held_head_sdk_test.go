package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestAnthropicSDKReadsHeldAndFailedOverStreams: the native route holds
// a stream's events before output (message_start, pings) and sends them
// with the first output, or drops them when the stream is refused there
// (overloaded_error) and the next deployment serves. Anthropic's SDK
// reads each as one whole message: the simulator's, one whose
// message_start was held (its id kept), and one failed over.
func TestAnthropicSDKReadsHeldAndFailedOverStreams(t *testing.T) {
	const (
		start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bad\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n"
		ping  = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
		over  = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
		text  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi there\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	)
	for _, c := range []struct{ name, body, model, wantID string }{
		{"sim", "", "claude-sim", ""},
		{"held then output", start + ping + text, "mid", "msg_bad"},
		{"failed over", start + ping + over, "mid", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, c.body)
			}))
			t.Cleanup(bad.Close)
			st := newStack(t, func(cfg *gateway.Config) {
				cfg.Providers = append(cfg.Providers, gateway.ProviderConfig{Name: "bad", Type: "anthropic", BaseURL: bad.URL + "/v1"})
				cfg.Models = append(cfg.Models,
					gateway.ModelConfig{Name: "mid", Deployments: []gateway.DeploymentConfig{{Name: "bad", Provider: "bad", UpstreamModel: "m"}}, Fallbacks: []string{"spare"}},
					gateway.ModelConfig{Name: "spare", Deployments: []gateway.DeploymentConfig{{Name: "good", Provider: "sim-anthropic", UpstreamModel: "sim-small"}}})
				cfg.Retry.Cooldown = time.Hour
			})
			client := anthropic.NewClient(aoption.WithBaseURL(st.url+"/anthropic"), aoption.WithAPIKey(testKey), aoption.WithMaxRetries(0))
			s := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(c.model), MaxTokens: 16,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			var msg anthropic.Message
			n := 0
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
				n++
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream error after %d events: %v", n, err)
			}
			if msg.ID == "" || len(msg.Content) == 0 || msg.StopReason == "" || msg.Usage.InputTokens == 0 || (c.wantID != "" && msg.ID != c.wantID) {
				t.Errorf("the SDK's message %+v", msg)
			}
		})
	}
}
