package gateway_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestStopClosesItsUpstreamConnections: once Stop has returned, the
// connections the gateway opened to its providers are closed, and the
// goroutines net/http runs for each (its read and write loops) end with
// them: kept idle, up to 1,024 a provider host, they outlived Stop by the
// transport's idle timeout (90 s), two goroutines and a file descriptor
// each, against the rule that a component's stop ends what it started.
// The upstream's end of them (the simulator's server goroutines) is the
// test's, not the gateway's, and is not counted.
func TestStopClosesItsUpstreamConnections(t *testing.T) {
	cfg, up := simConfig(t)
	before := goleak.IgnoreCurrent() // the simulator's
	st := &stack{sim: up, sink: &memSink{}, journal: &memJournal{}}
	st.gw = startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: st.sink, Journal: st.journal})
	st.url = "http://" + st.gw.Addr()
	var wg sync.WaitGroup
	for range 8 { // streams at once: as many upstream connections
		wg.Go(func() {
			resp := st.post(t, "/v1/chat/completions",
				`{"model":"sim-small","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":{"sim_delay_ms":"20"}}`)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	if err := st.gw.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections() // the test's own client connections
	if err := goleak.Find(before,
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),              // the simulator's ends of the connections
		goleak.IgnoreAnyFunction("net/http/httptest.(*Server).goServe"), // the simulator
	); err != nil {
		t.Fatalf("goroutines the gateway started outlived Stop:\n%v", err)
	}
}
