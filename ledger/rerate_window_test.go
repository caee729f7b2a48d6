package ledger_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRerateReadsEveryEventOnceByTimeWindows: re-rating reads its period
// in time windows that follow the events' density (migration 9's BRIN
// index reads a window's blocks alone; the whole partition was read and
// sorted for every batch of 2,000). Every event of [from, to) is examined
// and adjusted once, whatever the density: 4,500 events in one second
// (full batches, a window halved down to milliseconds, many events at one
// microsecond), events a second and a week apart, an event on from and
// one on to (excluded), and events outside the period.
func TestRerateReadsEveryEventOnceByTimeWindows(t *testing.T) {
	b := newBilling(t, nil)
	from, to := jan.Add(3*24*time.Hour), jan.Add(27*24*time.Hour)
	var events []usage.Event
	at := func(ts time.Time) { events = append(events, b.event("m", ts, usage.Tokens{PromptTokens: 1_000_000})) }
	at(from)
	dense := from.Add(90 * time.Minute)
	for i := range 4500 {
		at(dense.Add(time.Duration(i/3) * 500 * time.Microsecond)) // three at each instant
	}
	for i := range 50 {
		at(dense.Add(time.Hour + time.Duration(i)*time.Second))
	}
	at(from.Add(7 * 24 * time.Hour))
	at(from.Add(14*24*time.Hour + time.Hour)) // an hour's boundary
	at(to.Add(-time.Microsecond))
	inPeriod := len(events)
	at(to)
	at(from.Add(-time.Microsecond))
	at(jan.Add(29 * 24 * time.Hour))
	for len(events) > 0 {
		k := min(1000, len(events))
		b.write(events[:k]...)
		events = events[k:]
	}
	b.price("m", "USD", "1", "0", "") // 1 per million prompt tokens: 1 USD an event
	var batches int
	var last ledger.RerateProgress
	res, err := b.s.Rerate(b.ctx, from, to, func(p ledger.RerateProgress) {
		if p.Examined > last.Examined {
			batches++
		}
		if p.Through.Before(last.Through) || p.Through.Before(from) || p.Through.After(to) || p.Examined < last.Examined {
			t.Errorf("progress went from %+v to %+v; want it through later times, within [from, to]", last, p)
		}
		last = p
	})
	if err != nil || res.Examined != inPeriod || res.Adjusted != inPeriod || res.Priced != inPeriod {
		t.Fatalf("Rerate = %+v, %v; want %d examined, adjusted and priced", res, err, inPeriod)
	}
	if batches < 3 {
		t.Errorf("%d batches with events for %d events; want at least 3 (2,000 at most each)", batches, inPeriod)
	}
	if last.RerateResult != res || !last.Through.Equal(to) {
		t.Errorf("the last progress = %+v; want the result, through %s", last, to)
	}
	if again, err := b.s.Rerate(b.ctx, from, to, nil); err != nil || again.Examined != inPeriod || again.Adjusted != 0 {
		t.Errorf("re-rating again = %+v, %v; want %d examined, none adjusted", again, err, inPeriod)
	}
	bal, err := b.s.Balance(b.ctx, b.c.ID)
	if err != nil || bal.Charges != strconv.Itoa(inPeriod) {
		t.Fatalf("balance = %+v, %v; want %d charged: 1 for each event of the period, once", bal, err, inPeriod)
	}
}

// TestRerateReadsItsWindowAlone: re-rating's read of a batch must be able
// to read the batch's time window alone (migration 9's BRIN index on
// usage_events.occurred_at), and each event's refunds and their reversals
// by index: without them every batch read its month's partition whole and
// every ledger entry, and a re-rating's time grew with the square of its
// events (50 s for 300,000 events, BENCHMARKS.md). The planner is told not
// to read tables whole, so that the plan shows whether another way exists.
func TestRerateReadsItsWindowAlone(t *testing.T) {
	b := newBilling(t, nil)
	var events []usage.Event
	for i := range 3000 {
		events = append(events, b.event("m", jan.Add(time.Duration(i)*time.Minute), usage.Tokens{PromptTokens: 10}))
	}
	b.write(events...)
	if err := b.s.ExecForTest(b.ctx, "VACUUM ANALYZE"); err != nil {
		t.Fatal(err)
	}
	plan, err := b.s.ExplainRerateLoadForTest(b.ctx, jan.Add(24*time.Hour), jan.Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, whole := range []string{"Seq Scan on usage_events", "Seq Scan on ledger_entries"} {
		if strings.Contains(plan, whole) {
			t.Errorf("re-rating's batch read reads a table whole (%s):\n%s", whole, plan)
		}
	}
	// The BRIN index's name on each month's partition (as Postgres names
	// an index made on a partitioned table).
	if !regexp.MustCompile(`usage_events_\d{4}_\d{2}_occurred_at_idx`).MatchString(plan) {
		t.Errorf("re-rating's batch read does not read its window by the BRIN index:\n%s", plan)
	}
}
