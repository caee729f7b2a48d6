package meter_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// waitStatus waits up to 10 s for svc's status to satisfy ok.
func waitStatus(t *testing.T, svc *meter.Service, what string, ok func(meter.ServiceStatus) bool) meter.ServiceStatus {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := svc.Status()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the meter service's status is %+v, not %s", st, what)
		}
	}
}

func stopService(t *testing.T, svc *meter.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := svc.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestServiceReportsARefusedStream: with meter.replicas 3 on a JetStream
// server that is not in a cluster, the service retried for ever, logging
// WARN "meter worker waiting for NATS" at each retry, and told nobody
// else: /readyz called the meter fine while nothing reached the ledger (a
// crash review). A JetStream that answers and refuses is not NATS out of
// reach: the service's status says so, with the server's words and since
// when, and it is logged once at ERROR (then at most once a minute), not
// at every retry. Once the refusal ends, the worker runs and the status
// clears.
func TestServiceReportsARefusedStream(t *testing.T) {
	js := metertest.Connect(t, metertest.NewServer(t))
	store := ledgertest.NewStore(t)

	logs := &metertest.LockedBuffer{}
	svc := meter.NewService(js, store, meter.WorkerConfig{Stream: meter.StreamConfig{Replicas: 3},
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	svc.Start()
	began := time.Now()
	st := waitStatus(t, svc, "refused", func(st meter.ServiceStatus) bool { return st.Err != nil })
	if !st.Refused || !strings.Contains(st.Err.Error(), "replicas > 1 not supported in non-clustered mode") || st.Since.IsZero() {
		t.Fatalf("replicas 3 on one server: status %+v; want refused, with the server's words and a time", st)
	}
	time.Sleep(time.Until(began.Add(4 * time.Second))) // attempts at 0, 0.5, 1.5 and 3.5 s
	if again := svc.Status(); !again.Since.Equal(st.Since) || !again.Refused {
		t.Errorf("the status changed while the refusal lasted: %+v, then %+v", st, again)
	}
	stopService(t, svc)
	out := logs.String()
	if n := strings.Count(out, `"level":"ERROR"`); n != 1 || !strings.Contains(out, "replicas > 1 not supported in non-clustered mode") {
		t.Errorf("4 refused attempts logged %d ERROR lines (want 1, with the server's words):\n%s", n, out)
	}
	if strings.Contains(out, "waiting for NATS") {
		t.Errorf("a refusal is logged as a wait for NATS:\n%s", out)
	}

	// Another refusal (a stream of someone else's on the usage subject),
	// which ends: the worker then runs, and the status clears.
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SQUATTER", Subjects: []string{meter.DefaultSubject}}); err != nil {
		t.Fatal(err)
	}
	logs = &metertest.LockedBuffer{}
	svc = meter.NewService(js, store, meter.WorkerConfig{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	svc.Start()
	defer stopService(t, svc)
	st = waitStatus(t, svc, "refused", func(st meter.ServiceStatus) bool { return st.Err != nil })
	if !st.Refused || !strings.Contains(st.Err.Error(), "overlap") {
		t.Fatalf("the usage subject taken: status %+v; want refused, with the server's words", st)
	}
	if err := js.DeleteStream(ctx, "SQUATTER"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, svc, "running", func(st meter.ServiceStatus) bool { return st.Err == nil })
	if out := logs.String(); !strings.Contains(out, "meter worker running") {
		t.Errorf("the end of the refusal is not logged:\n%s", out)
	}
}

// TestServiceTellsNATSOutOfReach: NATS out of reach is not a refusal: the
// status says the worker waits for NATS, and WARN lines say so.
func TestServiceTellsNATSOutOfReach(t *testing.T) {
	nc, err := nats.Connect(metertest.NewServer(t).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	logs := &metertest.LockedBuffer{}
	svc := meter.NewService(js, ledgertest.NewStore(t), meter.WorkerConfig{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	svc.Start()
	defer stopService(t, svc)
	st := waitStatus(t, svc, "failed", func(st meter.ServiceStatus) bool { return st.Err != nil })
	if st.Refused || st.Since.IsZero() {
		t.Fatalf("NATS closed: status %+v; want an error that is not a refusal", st)
	}
	if out := logs.String(); !strings.Contains(out, "waiting for NATS") || strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("NATS out of reach is not logged as a wait at WARN:\n%s", out)
	}
}
