package meter_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestEmbeddedServerUsesTheSyncPolicy: a PubAck from the embedded server
// means what its sync policy says (DESIGN.md, invariant 2b: the policy is
// set explicitly, never left at NATS' default of an fsync every 2
// minutes). The server started, and the one a restart starts, run with the
// policy given, and with DefaultSync when given none.
func TestEmbeddedServerUsesTheSyncPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy meter.SyncPolicy
		want   meter.SyncPolicy
	}{
		{"none given", meter.SyncPolicy{}, meter.DefaultSync},
		{"an interval", meter.SyncPolicy{Interval: 250 * time.Millisecond}, meter.SyncPolicy{Interval: 250 * time.Millisecond}},
		{"always", meter.SyncPolicy{Always: true, Interval: meter.DefaultSync.Interval},
			meter.SyncPolicy{Always: true, Interval: meter.DefaultSync.Interval}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := meter.StartEmbedded(t.TempDir(), "", tc.policy, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Shutdown()
			cfg := e.Server().JetStreamConfig()
			if cfg == nil {
				t.Fatal("the embedded server runs without JetStream")
			}
			if got := (meter.SyncPolicy{Always: cfg.SyncAlways, Interval: cfg.SyncInterval}); got != tc.want {
				t.Fatalf("the embedded server syncs %+v, want %+v", got, tc.want)
			}
		})
	}
}
