package ledger

import "github.com/prometheus/client_golang/prometheus"

// storeMetrics are the ledger's Prometheus series.
type storeMetrics struct {
	unpriced     prometheus.Counter
	ratingErrors prometheus.Counter
}

// SetMetrics registers the ledger's metrics with reg:
// tollgate_ledger_unpriced_events_total (events stored with no price in
// force) and tollgate_ledger_rating_errors_total (events no price could
// rate, set aside by the worker).
func (s *Store) SetMetrics(reg prometheus.Registerer) {
	m := &storeMetrics{
		unpriced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tollgate", Subsystem: "ledger",
			Name: "unpriced_events_total", Help: "Events stored unpriced (rated at 0): add a price, then re-rate."}),
		ratingErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tollgate", Subsystem: "ledger",
			Name: "rating_errors_total", Help: "Events that could not be rated (their cost overflows) and were set aside."}),
	}
	reg.MustRegister(m.unpriced, m.ratingErrors)
	s.metrics = m
}
