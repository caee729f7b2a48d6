package gateway

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// owed holds the final events the sink refused (neither published nor
// spooled: NATS and the spool's disk both failing), which commit and
// retire journal with Fail. The server's background loop offers them to
// the sink again every second while it holds any (republishOwed), and
// ends each one's journal entry once it is durable: an event whose sink
// recovers is recorded then, not at the next start. At most maxOwed are
// held; beyond that an event is left to the crash journal alone (and, if
// the journal cannot write either, to its log line: logUndurable).
type owed struct {
	mu     sync.Mutex
	events []*usage.Event
}

// maxOwed bounds the events held for another publish (each a few hundred
// bytes to a few KiB).
const maxOwed = 100_000

// owedPublishTimeout bounds one publish of an owed event, and
// owedStopBudget the last try at Stop.
const (
	owedPublishTimeout = 5 * time.Second
	owedStopBudget     = 5 * time.Second
)

// add holds e for another publish; false when maxOwed are held already.
func (o *owed) add(e *usage.Event) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.events) >= maxOwed {
		return false
	}
	o.events = append(o.events, e)
	return true
}

// held returns the events held, oldest first. They stay held (and
// counted by the gauge) while republishOwed offers them: taken out, the
// gauge read 0 during each offer, nearly always with a publish that waits
// its timeout, and the alert on it never fired.
func (o *owed) held() []*usage.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

// drop lets go of the n oldest events held, made durable; those added
// since held stay.
func (o *owed) drop(n int) {
	if n == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = slices.Delete(o.events, 0, n)
}

// len is how many events are held.
func (o *owed) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.events)
}

// owe holds a copy of e, which the sink refused, for another publish, and
// reports whether it could. A copy: the sink normalizes an event in place
// as it publishes, on the background loop's goroutine, while the request
// that owed e goes on reading it (its usage chunk, its spend hold's
// charge); holding e itself was a data race.
func (s *Server) owe(e *usage.Event) bool {
	held := *e // Metadata is shared: Normalize replaces the map, never writes it
	if !s.owed.add(&held) {
		s.log.Error("usage events owed: more than the most held for another publish; this one waits in the crash journal for the next start",
			"request_id", cmp.Or(e.RequestID, e.ID), "event_id", e.ID, "customer_id", e.CustomerID, "held", maxOwed)
		return false
	}
	return true
}

// republishOwed offers the events the sink refused to it again, in order,
// until one is refused (the sink is still down: the rest wait for the
// next round) or ctx ends; each one made durable has its journal entry
// ended. It returns how many are still owed.
func (s *Server) republishOwed(ctx context.Context) int {
	es := s.owed.held()
	done := 0
	for _, e := range es {
		if ctx.Err() != nil {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, owedPublishTimeout)
		err := s.sink.Publish(pctx, e)
		cancel()
		if err != nil {
			break
		}
		s.journal.End(e.ID)
		done++
	}
	s.owed.drop(done)
	left := len(es) - done
	if done > 0 {
		s.log.Warn("usage events the sink had refused are now durable", "events", done, "still_owed", left)
	}
	return left
}

// registerOwed exports how many events are owed, as a gauge.
func (s *Server) registerOwed(reg prometheus.Registerer) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tollgate", Subsystem: "gateway", Name: "usage_events_owed",
		Help: "Usage events the sink refused (NATS and the spool both failing), held in memory and offered again every second; also in the crash journal."},
		func() float64 { return float64(s.owed.len()) }))
}
