package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestOwedGaugeCountsEventsBeingOfferedAgain: with NATS not answering a
// publish (a stream leader that stopped acknowledging: each publish waits
// publish_timeout) and the spool's disk full, an event is owed until one
// of them takes it. tollgate_gateway_usage_events_owed is the figure the
// critical alert TollgateUsageEventsOwed watches (> 0 for 5 minutes), and
// operations.md sends the operator to it; it read 0 while the background
// loop offered the events again, which with a publish that times out is
// nearly all the time (a review: 39 events owed, every scrape 0), so the
// alert never fired.
func TestOwedGaugeCountsEventsBeingOfferedAgain(t *testing.T) {
	reg := prometheus.NewRegistry()
	owingRequest(t, 500*time.Millisecond, reg,
		`{"model":"sim-small","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	owed := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "tollgate_gateway_usage_events_owed" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no tollgate_gateway_usage_events_owed")
		return 0
	}
	var samples []string
	zeros := 0
	for range 30 { // 3 s: several rounds of offers
		v := owed()
		if v == 0 {
			zeros++
		}
		samples = append(samples, fmt.Sprint(v))
		time.Sleep(100 * time.Millisecond)
	}
	if zeros > 0 {
		t.Errorf("the owed gauge read 0 in %d of 30 scrapes (100 ms apart) while one event was owed throughout: %s",
			zeros, strings.Join(samples, " "))
	}
}

// owingRequest serves body on a gateway whose sink refuses every event
// (NATS answers no publish, each waiting publishTimeout; the spools' disk
// is full), with its metrics in reg, and checks that the request's event
// was journaled as refused: owed, offered again every second.
func owingRequest(t *testing.T, publishTimeout time.Duration, reg *prometheus.Registry, body string) {
	t.Helper()
	js := metertest.Connect(t, metertest.NewServer(t))
	// Something answers nothing on the usage subject: every publish waits
	// for its PubAck until the publisher's timeout.
	sub, err := js.Conn().Subscribe(meter.DefaultSubject, func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	disk := metertest.SmallDisk(t, 1<<20)
	spools := make([]*meter.Spool, 2)
	for i, name := range []string{"spool", "spool-dead"} {
		if spools[i], err = meter.OpenSpool(filepath.Join(disk, name), 0); err != nil {
			t.Fatal(err)
		}
		sp := spools[i]
		t.Cleanup(func() { sp.Close() })
	}
	metertest.FillDisk(t, disk)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sink := meter.NewDurablePublisher(meter.NewPublisher(js, meter.StreamConfig{}, publishTimeout),
		spools[0], spools[1], func() bool { return true }, 0, log, nil)
	j := &memJournal{}
	cfg, _ := simConfig(t)
	deps := gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink, Journal: j, Log: log}
	if reg != nil {
		deps.Metrics = reg
	}
	gw := startGateway(t, cfg, deps)
	st := &stack{gw: gw, url: "http://" + gw.Addr()}
	resp := st.post(t, "/v1/chat/completions", body)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if calls := j.of(resp.Header.Get("X-Request-Id")); len(calls) < 2 || calls[len(calls)-1] != "fail" {
		t.Fatalf("journal calls %v: want the event journaled as refused (fail)", calls)
	}
}
