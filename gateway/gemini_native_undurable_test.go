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
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],`+
			`"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1,"totalTokenCount":10}}`+"\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"},"finishReason":"STOP","index":0}],`+
			`"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":5,"totalTokenCount":14}}`+"\n\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "gp", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "gem", Provider: "gp", UpstreamModel: "gemini-x"})
	})
	resp := st.post(t, "/gemini/v1beta/models/gem:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
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
	if strings.Contains(got, `"finishReason":"STOP"`) || strings.Contains(got, `"candidatesTokenCount":5`) {
		t.Errorf("the client got the usage and the end of a stream whose event is in memory alone:\n%s", got)
	}
	if err == nil {
		t.Errorf("the stream ended cleanly though its end was withheld; want it broken off:\n%s", got)
	}
}
