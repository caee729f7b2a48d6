package gateway_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAKillAwaitingAPubAckRecoversTheExactEvent (a crash review): the
// journal held a request's last checkpoint alone while the gateway waited
// for the PubAck of its final event. A process killed in that wait (a slow
// NATS holds it up to publish_timeout) was recovered with an estimate of a
// request whose exact usage it had: 201 of 400 completion tokens and no
// reasoning for a stream whose last chunks came in one read, 0 for a
// non-streamed answer. A publish slower than 10 ms now journals the event
// it is publishing, and the journal as the kill leaves it recovers that
// event, exact.
func TestAKillAwaitingAPubAckRecoversTheExactEvent(t *testing.T) {
	for _, c := range []struct{ name, model, body string }{
		{"stream", "sim-pro", `"stream":true,"stream_options":{"include_usage":true},"metadata":{"sim_chunks":"3"},`},
		{"stream, paced", "sim-small", `"stream":true,"metadata":{"sim_delay_ms":"5"},`},
		{"not streamed", "sim-small", ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			j, _, err := journal.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			st := newStack(t, nil)
			gw := startGateway(t, gateway.Config{Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: st.sim.URL + "/v1"}},
				Models: []gateway.ModelConfig{{Name: c.model, Provider: "sim"}}},
				gateway.Deps{Providers: providers(), Keys: keys{}, Sink: st.sink, Journal: j})
			st.url = "http://" + gw.Addr()
			st.sink.holdEvents(t)
			respc := make(chan *http.Response, 1)
			go func() {
				respc <- st.post(t, "/v1/chat/completions", `{"model":"`+c.model+`",`+c.body+
					`"max_tokens":400,"messages":[{"role":"user","content":"say something long please"}]}`)
			}()
			id := <-st.sink.called // the final event is being published, its PubAck awaited
			// The journal as a kill would leave it, once the wait has lasted.
			var reqs []journal.Request
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if reqs = killSnapshot(t, dir); len(reqs) == 1 && reqs[0].Final != nil {
					break
				}
			}
			st.sink.release()
			resp := <-respc
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			exact := st.sink.event(t, id)
			if len(reqs) != 1 {
				t.Fatalf("the journal holds %d requests in flight, want this one", len(reqs))
			}
			got := gw.Recover(reqs)[0]
			if got.ID != exact.ID || got.Status != usage.StatusOK || got.UsageSource != exact.UsageSource || got.Usage != exact.Usage {
				t.Fatalf("recovered %s %s %s %+v; want the event being published, %s %s %+v",
					got.ID, got.Status, got.UsageSource, got.Usage, exact.Status, exact.UsageSource, exact.Usage)
			}
		})
	}
}
