package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestSpendSnapshotSeedsTheNextProcess: what one spendHolds charged since
// its states, snapshot, seeds another: a key's day spent there is spent
// here, a customer's credit too; a newer state drops the seeded charges
// and an older one (a key bucket rebuilt) counts them without refusing the
// key as stale; a key with no charge of its day or month, or a snapshot
// with no change since the last, is left out.
func TestSpendSnapshotSeedsTheNextProcess(t *testing.T) {
	now := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	version := now.Add(-time.Hour).UnixNano()
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1000)), CreditLeftMicros: new(int64(5000)),
		Version: version, CustomerVersion: version}
	first := holdsAt(&now)
	for _, release := range admitted(t, first, k, 2, 100) {
		release(500)
	}
	b := first.snapshot()
	if b == nil || first.snapshot() != nil {
		t.Fatalf("snapshot %s, then %s; want the charges, then nothing (no change)", b, first.snapshot())
	}
	if !strings.Contains(string(b), `"k"`) || !strings.Contains(string(b), `"c"`) {
		t.Fatalf("snapshot %s; want key k and customer c", b)
	}

	next := holdsAt(&now)
	next.seed(b)
	if _, no := next.hold(k, 1); no == nil || no.held {
		t.Fatalf("the day's 1,000 spent before the restart: %+v; want refused as spent", no)
	}
	if next.snapshot() == nil {
		t.Fatal("seeded charges are not journaled again")
	}

	// A state older than the seeded charges' (a key bucket rebuilt) is no
	// reason to refuse the key as stale: the charges count on top of it.
	older := *k
	older.Version, older.CustomerVersion = version-1, version-1
	again := holdsAt(&now)
	again.seed(b)
	if _, no := again.hold(&older, 1); no == staleState || no == nil {
		t.Fatalf("an older state after a restart: %+v; want refused as spent, not stale", no)
	}

	// A newer state holds what was charged: the seeded charges go.
	newer := *k
	newer.Version, newer.CustomerVersion = version+1, version+1
	fresh := holdsAt(&now)
	fresh.seed(b)
	if _, no := fresh.hold(&newer, 1); no != nil {
		t.Fatalf("a newer state (holding the charges): %+v; want admitted", no)
	}

	// The next month, a key's charges of the month before count in none
	// of its limits: not carried; a customer's credit still counts them.
	now = now.AddDate(0, 1, 0)
	later := holdsAt(&now)
	later.seed(b)
	if s := string(later.snapshot()); strings.Contains(s, `"keys"`) || !strings.Contains(s, `"customers":{"c":`) {
		t.Fatalf("the next month's snapshot %s; want the customer's charges alone", s)
	}
}

// TestSpendSeedTakesNoNegativeCharge: a journaled charge below zero (no
// charge is: a refund reaches a key through its state) is read as 0, so
// that it lends a spent key nothing.
func TestSpendSeedTakesNoNegativeCharge(t *testing.T) {
	now := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	version := now.Add(-time.Hour).UnixNano()
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1000)), DaySpentMicros: 1000, Version: version}
	h := holdsAt(&now)
	h.seed([]byte(fmt.Sprintf(`{"keys":{"k":{"version":%d,"charged":-5000000,"day":%d,"day_charged":-5000000,"month":%d,"month_charged":-5000000}}}`,
		version, utcDay(now), utcMonth(now))))
	if _, no := h.hold(k, 1); no == nil || no.held {
		t.Fatalf("a key whose state has spent its day, seeded with negative charges: %+v; want refused as spent", no)
	}
}

// TestSpendSeedDropsAFarDay: charges journaled in a day a year ahead of
// the clock (the last process's clock far ahead, or a damaged record) are
// dropped: kept, the key's count stayed in that day until the clock got
// there, and what it was charged today still counted against it the next
// day, and the day after (refused for a year).
func TestSpendSeedDropsAFarDay(t *testing.T) {
	now := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	version := now.Add(-time.Hour).UnixNano()
	k := &usage.KeyState{KeyID: "k", CustomerID: "c", DailyLimitMicros: new(int64(1000)), Version: version}
	ahead := now.AddDate(1, 0, 0)
	h := holdsAt(&now)
	h.seed([]byte(fmt.Sprintf(`{"keys":{"k":{"version":%d,"charged":1,"day":%d,"day_charged":1,"month":%d,"month_charged":1}}}`,
		version, utcDay(ahead), utcMonth(ahead))))
	for range 10 { // today's limit spent
		release, no := h.hold(k, 300_000)
		if no != nil {
			break
		}
		release(300_000, now)
	}
	now = now.Add(24 * time.Hour)
	if _, no := h.hold(k, 300_000); no != nil {
		t.Fatalf("the next day, nothing of its limit spent: %+v; want admitted", no)
	}
}
