package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// squattedNATS starts an external NATS on which another stream, SQUATTER,
// took the dead-letter subject before Tollgate came (an operator's test,
// or an older set-up), and TOLLGATE_USAGE_DLQ exists with another subject:
// Tollgate cannot give its dead-letter stream its subject there, so a
// hand-over gets its usage events through, then fails at the dead letter,
// which SQUATTER stores. It returns the NATS URL and a JetStream on it.
func squattedNATS(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	addr := freeAddr(t)
	natsOn(t, t.TempDir(), addr)
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, subject := range map[string]string{"SQUATTER": meter.DLQSubject, meter.DLQStream: "tollgate.usage.dlq-old"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	return "nats://" + addr, js
}

// waitHandOverState waits until the hand-over's /readyz state holds every
// one of want, and returns it.
func waitHandOverState(t *testing.T, a *app, r roles, want ...string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := a.readiness(context.Background(), r).HandOver
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(got, w)
		}
		if ok {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: embedded_store_hand_over %q; want it to say %q", got, want)
		}
	}
}

// TestHandOverFailingMidwayTriesAgainInProcess: a hand-over that fails
// mid-way (its usage events sent, its dead letter stored by another stream
// that holds the dead-letter subject on the new NATS) is tried again in the
// background, with /readyz saying it failed, why, and when it tries again,
// and the log saying so at ERROR once; once the operator gives the subject
// back, the next attempt hands the store over without a restart: every
// event in the ledger once, the dead letter in its stream once.
func TestHandOverFailingMidwayTriesAgainInProcess(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	logs := &syncBuffer{}
	s := newStackLogs(t, nil, nil, logs)
	ids := s.strandedStore(50, "poison-tried-again")

	url, js := squattedNATS(t)
	s.env.NATSURL = url
	s.env.handOverRetry = [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}
	s.restart()
	r := roles{gateway: true, meter: true, admin: true}
	waitHandOverState(t, s.app, r, "failed", "SQUATTER")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), `"attempt":3`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no third attempt logged:\n%s", logs)
		}
	}
	// The wait between attempts doubles, up to the longest.
	for _, want := range []string{`"attempt":1,"retry_in":"50ms"`, `"attempt":2,"retry_in":"100ms"`, `"attempt":3,"retry_in":"200ms"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the hand-over's log lacks %s: the waits between attempts do not double from 50 ms up to 200 ms:\n%s", want, logs)
		}
	}

	// The operator's fix: SQUATTER goes, the dead-letter stream takes its
	// subject.
	ctx := context.Background()
	if err := js.DeleteStream(ctx, "SQUATTER"); err != nil {
		t.Fatal(err)
	}
	dlq, err := meter.EnsureDLQ(ctx, js, s.cfg.Meter.Stream())
	if err != nil {
		t.Fatal(err)
	}
	waitHandedOver(t, s.env.DataDir, 20*time.Second)
	s.waitEvents(50, 30*time.Second)
	for _, id := range ids {
		s.event(id)
	}
	letters, err := dlq.List(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].EventID != "poison-tried-again" || letters[0].Reason == "" {
		t.Fatalf("dead letters on the external NATS: %+v, want the poison message once, with its reason", letters)
	}
	if rd := s.app.readiness(ctx, r); rd.HandOver != "" {
		t.Errorf("/readyz after the hand-over: embedded_store_hand_over %q; want none", rd.HandOver)
	}
	var errors int
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, "embedded store hand-over") {
			errors++
		}
	}
	if errors != 1 {
		t.Errorf("%d ERROR lines about the hand-over, want 1 (the first failure; the next ones at WARN):\n%s", errors, logs)
	}
}

// TestStopDuringHandOverBackoffIsPrompt: a `tollgate meter` waiting to try
// a failed hand-over again does not hold the data directory's lock
// meanwhile, and its stop returns at once.
func TestStopDuringHandOverBackoffIsPrompt(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	s := newStack(t, nil)
	s.strandedStore(5, "poison-stop")

	url, _ := squattedNATS(t)
	e := s.env
	e.NATSURL, e.AdminListen = url, "127.0.0.1:0"
	e.handOverRetry = [2]time.Duration{time.Hour, time.Hour}
	r := roles{meter: true}
	a, err := start(context.Background(), s.log, e, s.cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close() })
	waitHandOverState(t, a, r, "failed", "trying again")
	release, err := lockDataDir(e.DataDir, "a test")
	if err != nil {
		t.Fatalf("the data directory is locked while the hand-over waits to try again: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for _, st := range a.stops {
		if st.name != "embedded store hand-over" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), st.timeout)
		began := time.Now()
		err := st.stop(ctx)
		cancel()
		if took := time.Since(began); err != nil || took > time.Second {
			t.Fatalf("the hand-over's stop during its wait: %v after %v; want nil at once", err, took)
		}
		return
	}
	t.Fatal("no hand-over started")
}
