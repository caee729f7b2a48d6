package usage_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAKeyIsExpiredFromItsExpiresAt: a key whose expires_at is t may not
// be used at t itself, only before it.
func TestAKeyIsExpiredFromItsExpiresAt(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s := usage.KeyState{ExpiresAt: &at}
	if s.ExpiredAt(at.Add(-time.Nanosecond)) || !s.ExpiredAt(at) {
		t.Fatalf("expired a nanosecond before %s: %v, at it: %v; want false, true", at, s.ExpiredAt(at.Add(-time.Nanosecond)), s.ExpiredAt(at))
	}
	if (&usage.KeyState{}).ExpiredAt(at) {
		t.Fatal("a key without expires_at expired")
	}
}

// TestASpendBlockEndsAtItsBlockedUntil: a daily or monthly spend limit's
// block says when it resets until that instant, and at it the key may
// spend again; a block without an end stays.
func TestASpendBlockEndsAtItsBlockedUntil(t *testing.T) {
	until := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	s := usage.KeyState{Blocked: "daily spend limit reached", BlockedUntil: &until}
	if got, want := s.BlockedAt(until.Add(-time.Nanosecond)), "daily spend limit reached; it resets at 2026-03-02T00:00:00Z"; got != want {
		t.Errorf("a nanosecond before the reset: %q, want %q", got, want)
	}
	if got := s.BlockedAt(until); got != "" {
		t.Errorf("at the reset: %q, want it lifted", got)
	}
	s.BlockedUntil = nil
	if got := s.BlockedAt(until.AddDate(1, 0, 0)); got != s.Blocked {
		t.Errorf("a block without an end, a year on: %q, want %q", got, s.Blocked)
	}
}
