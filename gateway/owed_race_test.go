package gateway_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestAnOwedEventIsNotSharedWithItsRequest (run it with -race): an event
// the sink refused (NATS not answering, the spool's disk full) was held
// for another publish as the request's own event, the one its exchange
// goes on reading (the usage chunk it sends, reportedAsBilled, the spend
// hold's charge), while the server's background loop published it again,
// and the sink normalizes an event in place as it publishes: every string
// field and the corrections rewritten on one goroutine while the request's
// read them on another (a data race; a torn string read can crash the
// gateway).
func TestAnOwedEventIsNotSharedWithItsRequest(t *testing.T) {
	js := metertest.Connect(t, metertest.NewServer(t))
	// Something answers nothing on the usage subject: every publish waits
	// for its PubAck until the publisher's timeout.
	sub, err := js.Conn().Subscribe(meter.DefaultSubject, func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	disk := metertest.SmallDisk(t, 1<<20)
	spool, err := meter.OpenSpool(filepath.Join(disk, "spool"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spool.Close() })
	dead, err := meter.OpenSpool(filepath.Join(disk, "spool-dead"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	metertest.FillDisk(t, disk)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sink := meter.NewDurablePublisher(meter.NewPublisher(js, meter.StreamConfig{}, 200*time.Millisecond),
		spool, dead, func() bool { return true }, 0, log, nil)
	j := &memJournal{}
	cfg, _ := simConfig(t)
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink, Journal: j, Log: log})
	st := &stack{gw: gw, url: "http://" + gw.Addr()}
	resp := st.post(t, "/v1/chat/completions",
		`{"model":"sim-small","stream":true,"stream_options":{"include_usage":true},"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if calls := j.of(resp.Header.Get("X-Request-Id")); len(calls) < 2 || calls[len(calls)-1] != "fail" {
		t.Fatalf("journal calls %v: want the event journaled as refused (fail)", calls)
	}
	time.Sleep(2500 * time.Millisecond) // rounds of offers of the owed events
}
