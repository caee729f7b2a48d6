package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestEnsureStreamKeepsReplicas makes the usage and dead-letter streams R3
// on a 3-node cluster, as processes with meter.replicas 3 do, then runs
// EnsureStream and EnsureDLQ with the default settings, as a `tollgate
// meter` or `tollgate admin` started without --config (meter.replicas 1)
// does beside them: both streams must stay R3. A review saw such an admin
// scale the dead-letter stream down to one replica, and such a meter the
// usage stream, silently: one disk then held every event not yet metered.
func TestEnsureStreamKeepsReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	js := connectAll(t, startCluster(t, 3))
	ensure := func(cfg meter.StreamConfig) {
		t.Helper()
		for {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := meter.EnsureStream(sctx, js, cfg)
			if err == nil {
				_, err = meter.EnsureDLQ(sctx, js, cfg)
			}
			scancel()
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("streams with replicas %d: %v", cfg.Replicas, err)
			}
			time.Sleep(200 * time.Millisecond) // a cluster electing its leaders
		}
	}
	ensure(meter.StreamConfig{Replicas: 3})
	ensure(meter.StreamConfig{}) // meter.replicas' default, 1
	for _, name := range []string{meter.DefaultStreamName, meter.DLQStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 3 {
			t.Errorf("stream %s has %d replicas after a process with meter.replicas 1 started, want 3 (as made)", name, got)
		}
	}
}
