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
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`)
	}))
	defer up.Close()
	cfg, _ := simConfig(t)
	cfg.Providers = append(cfg.Providers, gateway.ProviderConfig{Name: "op", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k"})
	cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "om", Provider: "op", UpstreamModel: "gpt-x"})
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: &memSink{}})
	req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions",
		strings.NewReader(`{"model":"om","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	code, body := answer(t, resp)
	if code != http.StatusBadGateway || !strings.Contains(body, "headers exceeded") {
		t.Fatalf("an upstream answer with 2.5 MiB of headers: %d %.300s; want 502 saying its headers exceeded the bound", code, body)
	}
}
