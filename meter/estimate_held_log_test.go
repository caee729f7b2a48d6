package meter_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/dashboards/metrics"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestWorkerWarnsOfAnEstimateHeldLong: a crash estimate held because an
// event stored more than the duplicate window before it is not
// acknowledged is logged at WARN once it has been held five windows,
// once, naming the first event not acknowledged and the consumer's ack
// floor, and written when that event is. Meanwhile it counts in
// tollgate_meter_estimates_held (TollgateCrashEstimatesHeld reads it),
// back to 0 once written. A crash review saw estimates held
// for good behind an ack floor that nats-server 2.9.10 left at 0 after
// repeated kills: in no ledger, no dead-letter stream and no log line.
func TestWorkerWarnsOfAnEstimateHeldLong(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, js, _, cfg, pub := estimateRig(t, ctx)
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	customer := uuid.NewString()
	older := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer,
		KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
		Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
		Usage: usage.Tokens{PromptTokens: 1000, CompletionTokens: 1}}
	if err := pub.Publish(ctx, &older); err != nil {
		t.Fatal(err)
	}
	kept := fetchOne(t, cons)           // another worker takes the older event and keeps it, unwritten
	time.Sleep(1500 * time.Millisecond) // past the 1 s window: the estimate is held
	estimate := older
	estimate.ID, estimate.Status, estimate.UsageSource = uuid.NewString(), usage.StatusCrashed, usage.SourceEstimated
	estimate.Usage = usage.Tokens{PromptTokens: 10, CompletionTokens: 1}
	if err := pub.Publish(ctx, &estimate); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	cfg.Observer = metrics.NewMeter(reg)
	held := func() float64 {
		mfs, err := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "tollgate_meter_estimates_held" && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no tollgate_meter_estimates_held series (%v)", err)
		return 0
	}
	metertest.StartWorker(t, ctx, js, store, cfg)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(logs.String(), "crash estimates held") && time.Now().Before(deadline) {
		_ = kept.InProgress() // the other worker is alive, and keeps it
		time.Sleep(500 * time.Millisecond)
	}
	line := logs.String()
	if !strings.Contains(line, "crash estimates held") || !strings.Contains(line, "first_unacknowledged_seq=1") ||
		!strings.Contains(line, "ack_floor=0") || strings.Count(line, "crash estimates held") != 1 {
		t.Fatalf("logged %q; want one WARN that crash estimates are held, naming sequence 1 and the ack floor 0", line)
	}
	if n := held(); n != 1 {
		t.Fatalf("tollgate_meter_estimates_held = %v while one estimate is held, want 1", n)
	}
	if err := kept.Ack(); err != nil {
		t.Fatal(err)
	}
	if row := waitUsage(t, store, customer, 1); row.PromptTokens != 10 {
		t.Fatalf("usage = %+v, want the estimate's 10 prompt tokens once the older event is acknowledged", row)
	}
	if n := held(); n != 0 {
		t.Fatalf("tollgate_meter_estimates_held = %v once the estimate is written, want 0", n)
	}
}
