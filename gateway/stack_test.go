package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestStreamStack: a stream's handler goroutine stays within an 8 KiB
// stack until its first event has been relayed and it waits for the next,
// over HTTP/1.1 and h2c upstreams (an idle stream keeps its stack for its
// whole life, see headerFlusher). The check runs in a child process with
// the runtime's stack limit at 8 KiB (streamStackLimit; 16 under the race
// detector, whose instrumentation makes every frame bigger): a goroutine that outgrows it
// crashes the child with the call that did. The gateway is mounted below
// another router, as tollgate serve mounts it, and its connections are new
// ones, as an idle stream's are; and then served by Start, where streams
// that last take their connections (the chain's goroutine and the
// hang-up watcher held to the same limit).
func TestStreamStack(t *testing.T) {
	if os.Getenv("TOLLGATE_STACK_CHILD") != "" {
		streamStackChild(t)
		return
	}
	for _, proto := range []string{"", gateway.ProtocolH2C} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStreamStack$", "-test.v")
		cmd.Env = append(os.Environ(), "TOLLGATE_STACK_CHILD=1", "TOLLGATE_STACK_PROTOCOL="+proto)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestStreamStack") {
			t.Fatalf("protocol %q: %v\n%s", proto, err, out)
		}
	}
}

func streamStackChild(t *testing.T) {
	up := newH2CSim(t)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers[0].BaseURL = up.URL + "/v1"
		c.Providers[0].Protocol = os.Getenv("TOLLGATE_STACK_PROTOCOL")
	})
	outer := chi.NewRouter()
	outer.Get("/v1/usage", func(http.ResponseWriter, *http.Request) {})
	outer.Mount("/", st.gw.Handler())
	srv := httptest.NewServer(outer)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	buf := make([]byte, 64<<10)
	// Mounted below another router and served by net/http (srv), and as
	// Start serves it, where a stream that lasts takes its connection and
	// goes on in a goroutine of its own (st.url).
	for i := range 6 {
		if i == 2 { // after a warm-up: first uses of a type (encoding/json's caches) are deep once
			debug.SetMaxStack(streamStackLimit)
		}
		delay, url := "10", srv.URL
		if i >= 2 {
			delay = "3000"
		}
		if i >= 4 {
			url = st.url
		}
		body := `{"model":"sim-small","stream":true,"stream_options":{"include_usage":true},"max_tokens":1,` +
			`"metadata":{"sim_chunks":"1","sim_delay_ms":"` + delay + `"},"messages":[{"role":"user","content":"` + strings.Repeat("word ", 50) + `"}]}`
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			for err == nil {
				_, err = resp.Body.Read(buf)
			}
			resp.Body.Close()
			continue
		}
		if n, _ := resp.Body.Read(buf); !strings.Contains(string(buf[:n]), `"role":"assistant"`) {
			t.Fatalf("first event: %q", buf[:n])
		}
		defer resp.Body.Close()
	}
	waitTaken(t, st.gw, 2)
	time.Sleep(300 * time.Millisecond) // every stream waiting for its next event
	debug.SetMaxStack(1 << 30)         // the end of a stream may go deeper (its usage decoded, its event published)
}
