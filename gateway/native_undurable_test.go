package gateway_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestGeminiNativeStreamWithholdsItsEndWhenItsEventIsNotDurable: a native
// Gemini stream has no end event of its own; it ends with the body's end,
// after the chunk with the finishReason and the final usageMetadata. With
// the event stream down and the crash journal's disk full while the
// stream was in flight, that last chunk (the usage, and the end) must be
// withheld and the stream broken off, as an Anthropic stream's
// message_delta is ("durable before done"): the client never reads a
// usage the ledger may lose. Found by mutation: the body's end sent the
// held chunk whatever the commit said, and no test saw it.
func TestGeminiNativeStreamWithholdsItsEndWhenItsEventIsNotDurable(t *testing.T) {
	endWithheld(t, "gemini", "/v1beta", "/gemini/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
		`data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],`+
			`"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1,"totalTokenCount":10}}`+"\n\n",
		`data: {"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"},"finishReason":"STOP","index":0}],`+
			`"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":5,"totalTokenCount":14}}`+"\n\n",
		`"finishReason":"STOP"`, `"candidatesTokenCount":5`)
}

// TestLateOutputAfterTheReportWithholdsTheReportWhenNotDurable: an
// Anthropic stream that sends output after its final report
// (message_delta) is broken off there, its event made durable first and
// the held report sent only if it was. With the event stream down and the
// crash journal's disk full by then, the report (the usage) must not
// reach the client: "durable before done". Found by mutation: committing
// without the durable check there let the report out, and no test saw it.
func TestLateOutputAfterTheReportWithholdsTheReportWhenNotDurable(t *testing.T) {
	endWithheld(t, "anthropic", "/v1", "/anthropic/v1/messages", `{"model":"m","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"up\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" late\"}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"message_delta", `"output_tokens":5`, "message_stop")
}

// endWithheld streams first from an upstream of provider type typ (its
// base URL's path base) to a client of the native route path (the model
// "m"), then fails the event stream and the crash journal, then has the
// upstream send rest and end. The client must read none of withheld,
// and the stream must break off rather than end cleanly.
func endWithheld(t *testing.T, typ, base, path, body, first, rest string, withheld ...string) {
	t.Helper()
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, rest)
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "p", Type: typ, BaseURL: up.URL + base, APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "m", Provider: "p", UpstreamModel: "up"})
	})
	resp := st.post(t, path, body)
	buf := make([]byte, 16)
	if _, err := io.ReadAtLeast(resp.Body, buf, 1); err != nil { // the stream is under way
		t.Fatal(err)
	}
	st.journal.setFailing(errors.New("journal: write: no space left on device"))
	st.sink.setFail(errors.New("nats: no responders; spool: no space left on device"))
	close(release)
	more, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := string(buf) + string(more)
	for _, w := range withheld {
		if strings.Contains(got, w) {
			t.Errorf("the client got %s, of a stream whose event is in memory alone:\n%s", w, got)
		}
	}
	if err == nil {
		t.Errorf("the stream ended cleanly though its end was withheld; want it broken off:\n%s", got)
	}
}
