package gateway_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestUpstreamRedirectsAreNotFollowed: an upstream that answers with a
// redirect does not send the gateway, with the request's body and the
// provider's credential, where it points, though a server there would
// answer well. The client gets a 502 that says why and not where; the
// event records the upstream error and no tokens. On every route that
// calls an upstream: chat (streamed and not), the Anthropic and Gemini
// native ones, and token counting (not metered).
func TestUpstreamRedirectsAreNotFollowed(t *testing.T) {
	var lured atomic.Int64
	good := sim.New()
	lure := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lured.Add(1)
		good.ServeHTTP(w, r)
	}))
	defer lure.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, lure.URL+r.URL.RequestURI(), code)
			}))
			defer moved.Close()
			st := newStack(t, func(c *gateway.Config) {
				c.Providers = append(c.Providers,
					gateway.ProviderConfig{Name: "moved", Type: "openai", BaseURL: moved.URL + "/v1", APIKey: "sk-moved"},
					gateway.ProviderConfig{Name: "moved-ant", Type: "anthropic", BaseURL: moved.URL + "/v1", APIKey: "sk-ant-moved"},
					gateway.ProviderConfig{Name: "moved-gem", Type: "gemini", BaseURL: moved.URL + "/v1beta", APIKey: "gm-moved"})
				c.Models = append(c.Models, gateway.ModelConfig{Name: "ant-moved", Provider: "moved-ant", UpstreamModel: "sim-pro"},
					gateway.ModelConfig{Name: "gem-moved", Provider: "moved-gem", UpstreamModel: "sim-pro"})
			})
			for _, tc := range []struct {
				name, path, body string
				header           []string
				metered          bool
			}{
				{"chat stream", "/v1/chat/completions",
					`{"model":"moved/sim-pro","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, nil, true},
				{"chat", "/v1/chat/completions",
					`{"model":"moved/sim-pro","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, nil, true},
				{"Anthropic native", "/anthropic/v1/messages",
					`{"model":"ant-moved","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
					[]string{"x-api-key", testKey}, true},
				{"Gemini native", "/gemini/v1beta/models/gem-moved:streamGenerateContent?alt=sse",
					`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":8}}`,
					[]string{"x-goog-api-key", testKey}, true},
				{"Anthropic token count", "/anthropic/v1/messages/count_tokens",
					`{"model":"ant-moved","messages":[{"role":"user","content":"hi"}]}`, []string{"x-api-key", testKey}, false},
			} {
				before := st.sink.count()
				resp := st.post(t, tc.path, tc.body, tc.header...)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "redirect") {
					t.Errorf("%s: %d %s, want 502 saying the upstream redirected", tc.name, resp.StatusCode, b)
				}
				if strings.Contains(string(b), lure.URL) || strings.Contains(string(b), moved.URL) || resp.Header.Get("Location") != "" {
					t.Errorf("%s: the client learns an upstream address: %s (Location %q)", tc.name, b, resp.Header.Get("Location"))
				}
				if !tc.metered {
					continue
				}
				e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
				if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, fmt.Sprint(code)) ||
					e.Usage.PromptTokens != 0 || e.Usage.CompletionTokens != 0 {
					t.Errorf("%s: event %s %q, usage %+v; want an upstream error with no tokens", tc.name, e.Status, e.Error, e.Usage)
				}
				if st.sink.count() != before+1 {
					t.Errorf("%s: %d events, want one", tc.name, st.sink.count()-before)
				}
			}
			if n := lured.Load(); n != 0 {
				t.Fatalf("the server a redirect pointed at got %d requests, want none", n)
			}
		})
	}
}

// TestRedirectingDeploymentFailsOver: a deployment that redirects is a
// failed one: the request goes on to the model's fallback, which answers,
// and not to where the redirect points, though a server there answers too.
func TestRedirectingDeploymentFailsOver(t *testing.T) {
	lure := httptest.NewServer(sim.New())
	defer lure.Close()
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, lure.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer moved.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "moved", Type: "openai", BaseURL: moved.URL + "/v1", APIKey: "sk-moved"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "flaky", Provider: "moved", UpstreamModel: "sim-pro", Fallbacks: []string{"sim-pro"}})
	})
	resp := st.post(t, "/v1/chat/completions", `{"model":"flaky","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s, want the fallback's 200", resp.StatusCode, b)
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusOK || e.Model != "sim-pro" || e.Usage.CompletionTokens == 0 {
		t.Fatalf("event %s, model %s, usage %+v; want the fallback's answer billed", e.Status, e.Model, e.Usage)
	}
}

// TestBaseURLUserInfoIsBasicAuth: user info in a base URL is sent as basic
// auth, as an http.Client would send it, unless the provider's credential
// takes the Authorization header (OpenAI's Bearer key does; Anthropic's
// x-api-key does not).
func TestBaseURLUserInfoIsBasicAuth(t *testing.T) {
	good := sim.New()
	seen := make(chan string, 2)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		good.ServeHTTP(w, r)
	}))
	defer up.Close()
	withUser := strings.Replace(up.URL, "http://", "http://proxy-user:proxy%20pass@", 1)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "behind-openai", Type: "openai", BaseURL: withUser + "/v1", APIKey: "sk-behind"},
			gateway.ProviderConfig{Name: "behind-ant", Type: "anthropic", BaseURL: withUser + "/v1", APIKey: "sk-ant-behind"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "ant-behind", Provider: "behind-ant", UpstreamModel: "sim-pro"})
	})
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("proxy-user:proxy pass"))
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"behind-openai/sim-pro","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, "Bearer sk-behind"},
		{"/v1/chat/completions", `{"model":"ant-behind","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, basic},
	} {
		resp := st.post(t, tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.body, resp.StatusCode, b)
		}
		if got := <-seen; got != tc.want {
			t.Errorf("%s: the upstream got Authorization %q, want %q", tc.body, got, tc.want)
		}
	}
}

// TestRedirectLoggedWithoutKey: the operator's log names where an upstream
// redirected, but not the provider's key, which an upstream may echo into
// the Location to have it written there.
func TestRedirectLoggedWithoutKey(t *testing.T) {
	const secret = "sk-moved-0123456789"
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.9.8.7/v1/chat/completions?key="+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "),
			http.StatusTemporaryRedirect)
	}))
	defer moved.Close()
	var logged bytes.Buffer
	var mu sync.Mutex
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "moved", Type: "openai", BaseURL: moved.URL + "/v1", APIKey: secret}},
		Models:    []gateway.ModelConfig{{Name: "m", Provider: "moved"}},
	}
	sink := &memSink{}
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink,
		Log: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	st := &stack{gw: gw, url: "http://" + gw.Addr(), sink: sink}
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	sink.event(t, resp.Header.Get("X-Request-Id")) // the request has ended
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "10.9.8.7") || strings.Contains(logged.String(), secret) {
		t.Fatalf("the log should name where the upstream redirected, without the key:\n%s", logged.String())
	}
}

// lockedWriter serializes writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
