package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestUpstreamHeadersAreBounded: an upstream's response header is read up
// to 1 MiB, not net/http's default 10 MiB: a resource review had 30
// requests at once to an upstream sending endless headers take the
// gateway from 104 to 315 MB, so a broken or hostile provider under load
// could hold gigabytes. Past the bound the request fails as the
// upstream's (502), saying so.
func TestUpstreamHeadersAreBounded(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for i := range 40 { // 40 headers of 64 KiB: 2.5 MiB
			w.Header().Set("X-Pad-"+strings.Repeat("a", i+1), strings.Repeat("p", 64<<10))
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, wholeChatAnswer)
	}))
	defer up.Close()
	cfg, _ := simConfig(t)
	cfg = withModelOm(cfg, up.URL)
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: &memSink{}})
	code, body := postChat(t, gw, `{"model":"om","messages":[{"role":"user","content":"hi"}]}`)
	if code != http.StatusBadGateway || !strings.Contains(body, "headers exceeded") {
		t.Fatalf("an upstream answer with 2.5 MiB of headers: %d %.300s; want 502 saying its headers exceeded the bound", code, body)
	}
}
