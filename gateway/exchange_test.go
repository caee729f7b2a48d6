package gateway

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// logRequestArgs is the request log line as settle wrote it before
// logRequest: key-value pairs, and the error when there is one.
func logRequestArgs(ctx context.Context, log *slog.Logger, level slog.Level, e *usage.Event, retried bool) {
	args := []any{"request_id", e.ID, "customer_id", e.CustomerID, "key_id", e.KeyID,
		"endpoint", e.Endpoint, "model", e.Model, "provider", e.Provider, "deployment", e.Deployment,
		"attempt", e.Attempt, "retried", retried, "status", e.Status,
		"http_status", e.HTTPStatus, "usage_source", e.UsageSource, "prompt_tokens", e.Usage.PromptTokens,
		"completion_tokens", e.Usage.CompletionTokens, "ttft_ms", e.TTFTMillis, "duration_ms", e.DurationMillis}
	if e.Error != "" {
		args = append(args, "error", e.Error)
	}
	log.Log(ctx, level, "request", args...)
}

func logEvent() *usage.Event {
	return &usage.Event{ID: "0197a3c2-1111-7222-8333-000000000001", CustomerID: "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff",
		KeyID: "0197a3c2-9999-7888-8777-666655554444", Endpoint: "/v1/chat/completions", Model: "sim-small \"q\" <é>",
		Provider: "sim", Deployment: "east", Attempt: 2, Status: usage.StatusUpstreamError, HTTPStatus: 200,
		UsageSource: usage.SourcePartial, Usage: usage.Tokens{PromptTokens: 57, CompletionTokens: 10}, TTFTMillis: 3,
		DurationMillis: 41}
}

// TestLogRequest: the typed attributes write the line the key-value pairs
// wrote, with the JSON and the text handler; a failed request's line says
// why (the event's error), which it did not.
func TestLogRequest(t *testing.T) {
	noTime := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	for name, handler := range map[string]func(io.Writer) slog.Handler{
		"json": func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, noTime) },
		"text": func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, noTime) },
	} {
		for _, cause := range []string{"", "upstream error event: overloaded"} {
			var got, want bytes.Buffer
			e := logEvent()
			e.Error = cause
			logRequest(context.Background(), slog.New(handler(&got)), slog.LevelWarn, e, true)
			logRequestArgs(context.Background(), slog.New(handler(&want)), slog.LevelWarn, e, true)
			if got.String() != want.String() || got.Len() == 0 || !strings.Contains(got.String(), cause) ||
				cause == "" && (strings.Contains(got.String(), `"error":`) || strings.Contains(got.String(), " error=")) {
				t.Errorf("%s:\n got %s\nwant %s", name, got.String(), want.String())
			}
		}
	}
}

// BenchmarkLogRequest writes the request log line with the JSON handler,
// as key-value pairs ("args", as before) and typed ("attrs").
func BenchmarkLogRequest(b *testing.B) {
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	e := logEvent()
	ctx := context.Background()
	for _, f := range []struct {
		name string
		log  func(context.Context, *slog.Logger, slog.Level, *usage.Event, bool)
	}{{"args", logRequestArgs}, {"attrs", logRequest}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f.log(ctx, log, slog.LevelInfo, e, false)
			}
		})
	}
}
