package meter_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
)

// TestServiceReportsAConsumerWithoutQuorum runs a meter Service on an R3
// usage stream, then stops two of the cluster's three servers (the one its
// connection is on keeps running): the consumer has no leader, and nothing
// can be delivered or written. Its status must say so (`tollgate meter`'s
// /readyz reads it), and clear again once the servers are back. A review
// partitioned a cluster for 40 s under load: both meters' /readyz answered
// 200, "ready", "nats":"connected", throughout.
func TestServiceReportsAConsumerWithoutQuorum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	servers, opts := startClusterOpts(t, 3)
	js := connectAll(t, servers)
	scfg := meter.StreamConfig{Replicas: 3}
	// Pull requests of 4 s (heartbeats every 2 s) instead of nats.go's 30 s:
	// the loss is noticed in seconds, not the 15 s of missed heartbeats
	// that made this the slowest test of the package.
	wcfg := meter.WithPullExpiry(meter.WorkerConfig{Stream: scfg, Logger: slog.New(slog.DiscardHandler)}, 4*time.Second)
	svc := meter.NewService(js, ledgertest.NewStore(t), wcfg)
	svc.Start()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = svc.Stop(sctx)
	})
	until := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok() {
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("%s: not within %s; the service's status: %+v", what, d, svc.Status())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	pulling := func() bool { // the worker's subscription waits on the consumer
		ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
		defer icancel()
		c, err := js.Consumer(ictx, meter.DefaultStreamName, "tollgate-meter")
		if err != nil {
			return false
		}
		info, err := c.Info(ictx)
		return err == nil && info.NumWaiting > 0
	}
	until("the worker pulls from its consumer", 30*time.Second, pulling)
	if st := svc.Status(); st.Err != nil {
		t.Fatalf("a running worker's status: %+v", st)
	}

	start := time.Now()
	on := js.Conn().ConnectedServerName()
	var stopped []int
	for i, s := range servers {
		if s.Name() != on {
			s.Shutdown()
			s.WaitForShutdown()
			stopped = append(stopped, i)
		}
	}
	// nats.go reports missed heartbeats after twice its heartbeat (4 s
	// here; 15 s for the default 30 s pull expiry); the service asks for
	// its consumer then, which has no leader to answer.
	until("the service reports its consumer without a quorum", 45*time.Second, func() bool { return svc.Status().Err != nil })
	t.Logf("with 2 of 3 servers stopped, after %s: %v", time.Since(start).Round(time.Second), svc.Status().Err)
	start = time.Now()

	for _, i := range stopped {
		servers[i] = startServer(t, opts[i])
	}
	until("the service clears its status with the servers back", 60*time.Second, func() bool { return svc.Status().Err == nil })
	t.Logf("cleared %s after the servers' restart", time.Since(start).Round(time.Second))
}
