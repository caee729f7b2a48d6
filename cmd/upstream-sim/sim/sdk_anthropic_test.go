package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// TestAnthropicSDK checks that the official Go SDK parses the simulator's
// streamed and non-streamed Messages responses and finds the usage.
func TestAnthropicSDK(t *testing.T) {
	s, srv := start(t)
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("x"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	// prompt 3 + (4+2) + (4+4) = 17, 8 cached; 10 tokens: 5 thinking, 5 text.
	params := anthropic.MessageNewParams{
		Model:     "sim-pro",
		MaxTokens: 10,
		System:    []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three four"))},
		Metadata:  anthropic.MetadataParam{UserID: anthropic.String("sim_chunks=2")},
	}
	ctx := context.Background()
	stream := client.Messages.NewStreaming(ctx, params)
	var msg anthropic.Message
	events := 0
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("event %d: %v", events, err)
		}
		events++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// message_start, thinking start/delta/signature/stop, text start, 2 deltas,
	// text stop, message_delta, message_stop (the ping is not surfaced).
	if events != 11 {
		t.Errorf("%d events", events)
	}
	u := msg.Usage
	if u.InputTokens != 9 || u.CacheReadInputTokens != 8 || u.CacheCreationInputTokens != 0 || u.OutputTokens != 10 {
		t.Errorf("usage %+v", u)
	}
	five := strings.Repeat("tok ", 5)
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != five ||
		msg.Content[1].Type != "text" || msg.Content[1].Text != five || msg.StopReason != anthropic.StopReasonMaxTokens ||
		msg.Model != "sim-pro" || !strings.HasPrefix(msg.ID, "msg_") {
		t.Errorf("message %+v", msg)
	}

	res, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.InputTokens != u.InputTokens || res.Usage.CacheReadInputTokens != 8 || res.Usage.OutputTokens != 10 ||
		len(res.Content) != 2 || res.Content[1].Text != five || res.StopReason != msg.StopReason {
		t.Errorf("non-streamed %+v", res)
	}

	// A mid-stream error event reaches the SDK as a stream error.
	stream = client.Messages.NewStreaming(ctx, params, option.WithHeader("X-Sim-Fault", "error_after:1"))
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "overloaded_error") {
		t.Errorf("error_after: stream error %v", err)
	}
	// sim_status comes back as an API error with Anthropic's envelope.
	_, err = client.Messages.New(ctx, params, option.WithHeader("X-Sim-Status", "529"))
	if apiErr, ok := errors.AsType[*anthropic.Error](err); !ok || apiErr.StatusCode != 529 || !strings.Contains(err.Error(), "overloaded_error") {
		t.Errorf("sim_status: %v", err)
	}
	st := waitStats(t, s, 4)
	if a := st.ByProtocol.Anthropic.Requests; a.OK != 2 || a.StreamError != 1 || a.Status != 1 {
		t.Errorf("stats %+v", st)
	}
}
