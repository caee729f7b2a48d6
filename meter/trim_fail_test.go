package meter_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// trimObserver counts the failed trims a worker reports
// (Observer.TrimFailed), and observes nothing else.
type trimObserver struct {
	redeliveries
	failed atomic.Int64
}

func (o *trimObserver) TrimFailed() { o.failed.Add(1) }

// TestWorkerCountsAndLogsTrimsThatFail: a worker that cannot trim the
// usage stream (here JetStream refuses its purges: the stream was set
// deny_purge) keeps every event in it, as it must, and says so: each
// failed trim is counted (Observer.TrimFailed, the trim-failure metric
// its alert reads) and the run of failures is logged at WARN with the
// server's words. A trim that took no notice of the purge's error, or
// that neither counted nor logged its failures, said nothing while the
// stream grew with every event (a mutation audit: no test saw it).
func TestWorkerCountsAndLogsTrimsThatFail(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.NewStream(t)
	stream, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	metertest.EditStream(t, js, meter.DefaultStreamName, func(c *jetstream.StreamConfig) { c.DenyPurge = true })
	obs := &trimObserver{}
	logs := &metertest.LockedBuffer{}
	store := ledgertest.NewStore(t)
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{TrimEvery: 20 * time.Millisecond, BatchWait: 20 * time.Millisecond,
		Observer: obs, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	customer := uuid.NewString()
	const n = 5
	publishFor(t, ctx, meter.NewPublisher(js, meter.StreamConfig{}, 0), customer, n, 0)
	waitUsage(t, store, customer, n)
	eventually(t, "failed trims counted", func() bool { return obs.failed.Load() >= 2 })
	out := logs.String()
	var line string
	for l := range strings.Lines(out) {
		if strings.Contains(l, "the usage stream is not trimmed") {
			line = l
			break
		}
	}
	if !strings.Contains(line, `"level":"WARN"`) || !strings.Contains(line, "purge not permitted") {
		t.Errorf("failed trims logged as %q; want a WARN line with the server's words. Log:\n%s", line, out)
	}
	si, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != n {
		t.Errorf("the usage stream holds %d events; want all %d, none trimmed", si.State.Msgs, n)
	}
}
