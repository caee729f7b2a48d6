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

// TestLateOutputAfterTheReportWithholdsTheReportWhenNotDurable: an
// Anthropic stream that sends output after its final report
// (message_delta) is broken off there, its event made durable first and
// the held report sent only if it was. With the event stream down and the
// crash journal's disk full by then, the report (the usage) must not
// reach the client: "durable before done". Found by mutation: committing
// without the durable check there let the report out, and no test saw it.
func TestLateOutputAfterTheReportWithholdsTheReportWhenNotDurable(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" late\"}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "ap", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "cl", Provider: "ap", UpstreamModel: "claude-x"})
	})
	resp := st.post(t, "/anthropic/v1/messages", `{"model":"cl","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`)
	buf := make([]byte, 16)
	if _, err := io.ReadAtLeast(resp.Body, buf, 1); err != nil { // the stream is under way
		t.Fatal(err)
	}
	st.journal.setFailing(errors.New("journal: write: no space left on device"))
	st.sink.setFail(errors.New("nats: no responders; spool: no space left on device"))
	close(release)
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := string(buf) + string(rest)
	if strings.Contains(got, "message_delta") || strings.Contains(got, `"output_tokens":5`) || strings.Contains(got, "message_stop") {
		t.Errorf("the client got the usage or the end of a stream whose event is in memory alone:\n%s", got)
	}
	if err == nil {
		t.Errorf("the stream ended cleanly though its end was withheld; want it broken off:\n%s", got)
	}
}
