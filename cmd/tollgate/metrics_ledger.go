package main

import "github.com/prometheus/client_golang/prometheus"

// ledgerMetrics exports the ledger's measurements:
// tollgate_ledger_unpriced_events_total and tollgate_ledger_rating_errors_total.
type ledgerMetrics struct {
	unpriced, ratingErrors prometheus.Counter
}

func newLedgerMetrics(reg prometheus.Registerer) *ledgerMetrics {
	m := &ledgerMetrics{
		unpriced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tollgate", Subsystem: "ledger",
			Name: "unpriced_events_total", Help: "Events stored unpriced (rated at 0): add a price, then re-rate."}),
		ratingErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tollgate", Subsystem: "ledger",
			Name: "rating_errors_total", Help: "Events that could not be rated (their cost overflows) and were set aside."}),
	}
	reg.MustRegister(m.unpriced, m.ratingErrors)
	return m
}

func (m *ledgerMetrics) Unpriced(n int) { m.unpriced.Add(float64(n)) }
func (m *ledgerMetrics) RatingError()   { m.ratingErrors.Inc() }
