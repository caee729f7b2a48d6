package meter

import (
	"fmt"
	"time"
)

// SyncPolicy is when JetStream fsyncs what it stores, and so what a PubAck
// promises: with Always, an acknowledged event is on disk; with an
// Interval, a power loss (not a process crash: the kernel keeps what was
// written) can take the events acknowledged in the last Interval. NATS'
// own default is an interval of 2 minutes; Tollgate never leaves it at
// that (see DefaultSync).
type SyncPolicy struct {
	Always   bool
	Interval time.Duration
}

// DefaultSync is the policy of the embedded server unless configured:
// fsync every 100 ms, chosen by measurement (BENCHMARKS.md, "JetStream
// sync policy").
var DefaultSync = SyncPolicy{Interval: 100 * time.Millisecond}

// ParseSyncPolicy reads a sync setting: "always", or a duration such as
// "100ms". It returns an error naming what it expected.
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	if s == "always" {
		return SyncPolicy{Always: true, Interval: DefaultSync.Interval}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return SyncPolicy{}, fmt.Errorf("sync_interval must be \"always\" or a positive duration such as 100ms, not %q", s)
	}
	return SyncPolicy{Interval: d}, nil
}

// String is the policy as the configuration writes it.
func (p SyncPolicy) String() string {
	if p.Always {
		return "always"
	}
	return p.Interval.String()
}
