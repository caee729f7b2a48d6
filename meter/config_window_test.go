package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestConfigRefusesADuplicateWindowJetStreamRefuses (an operations review):
// `tollgate config check` called a meter.duplicate_window of 50ms (or -1s)
// valid, and serve started ready with it, while JetStream refuses a usage
// stream whose duplicate window is negative or under 100ms ("duplicates
// window needs to be >= 100ms"): nothing was metered, every event went to
// the spool until the gateway answered 503. The configuration must refuse
// at start exactly the windows the server refuses.
func TestConfigRefusesADuplicateWindowJetStreamRefuses(t *testing.T) {
	ctx := context.Background()
	for _, w := range []time.Duration{-time.Second, time.Nanosecond, 50 * time.Millisecond, 99 * time.Millisecond,
		100 * time.Millisecond, time.Second, 10 * time.Minute} {
		// A server each: a stream made again at once under the name of one
		// just deleted was refused now and then ("error creating store for
		// stream", code 500: the old store's removal not yet done), which
		// is not the window's refusal.
		js := metertest.Connect(t, metertest.NewServer(t))
		c := meter.Config{DuplicateWindow: w}
		valid := c.Validate() == nil
		_, err := meter.EnsureStream(ctx, js, meter.StreamConfig{DuplicateWindow: w})
		taken := err == nil
		if valid != taken {
			t.Errorf("meter.duplicate_window %s: the configuration is valid: %v; JetStream takes the usage stream: %v (%v); want both the same",
				w, valid, taken, err)
		}
	}
}
