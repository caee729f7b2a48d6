package gateway

import (
	"testing"
	"time"
)

// A cool-down doubles per failure in a row: each time the deployment is
// tried again after its rest and fails again. Attempts that were in flight
// together when it failed (a burst of non-streamed requests cut off by an
// upstream restart, or answered 503 together) are one failure of the
// deployment, not one each: counted one by one, eight requests in flight
// at a blip rested it 2^7 times its cool-down (128 s for 1 s; at the
// defaults, 5 s, the 5-minute maximum after 7), its traffic all moved to
// the other deployments meanwhile.
func TestCooldownDoublesPerRetryNotPerAttemptInFlight(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newDeployment(DeploymentConfig{Name: "d", Weight: 1}, &ProviderConfig{})
	d.now = func() time.Time { return now }
	rc := RetryConfig{Cooldown: time.Second, MaxCooldown: time.Hour}

	// Eight attempts in flight together, all failed by one blip.
	for range 8 {
		d.acquire()
	}
	now = now.Add(100 * time.Millisecond)
	for range 8 {
		d.release(outcomeFailed, 0, rc)
	}
	if got := d.availableAt().Sub(now); got != time.Second {
		t.Fatalf("8 attempts in flight failed at once: the deployment rests %v, want the cool-down, 1s", got)
	}
	// Tried again after its rest, it fails again: now the cool-down doubles,
	// and again after that.
	for _, want := range []time.Duration{2 * time.Second, 4 * time.Second} {
		now = d.availableAt()
		d.acquire()
		d.release(outcomeFailed, 0, rc)
		if got := d.availableAt().Sub(now); got != want {
			t.Fatalf("a failure after the rest: rests %v, want %v", got, want)
		}
	}
	// A success ends the run, even one that ends while the deployment
	// rests (a stream begun before the failures); a failure after it rests
	// the cool-down again.
	d.acquire()
	d.release(outcomeOK, 0, rc)
	d.acquire()
	d.release(outcomeFailed, 0, rc)
	if got := d.availableAt().Sub(now); got != 4*time.Second {
		t.Fatalf("a failure while resting, after a success: rest ends %v after the last rest began, want 4s (kept)", got)
	}
}
