package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/ledger"
)

// Ledger exports the ledger's measurements (ledger.Observer):
// tollgate_ledger_unpriced_events_total and tollgate_ledger_rating_errors_total.
type Ledger struct {
	unpriced, ratingErrors prometheus.Counter
}

var _ ledger.Observer = (*Ledger)(nil)

// NewLedger registers the ledger's series with reg.
func NewLedger(reg prometheus.Registerer) *Ledger {
	m := &Ledger{
		unpriced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tollgate", Subsystem: "ledger",
			Name: "unpriced_events_total", Help: "Events stored unpriced (rated at 0): add a price, then re-rate."}),
		ratingErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tollgate", Subsystem: "ledger",
			Name: "rating_errors_total", Help: "Events that could not be rated (their cost overflows) and were set aside."}),
	}
	reg.MustRegister(m.unpriced, m.ratingErrors)
	return m
}

// Unpriced implements ledger.Observer.
func (m *Ledger) Unpriced(n int) { m.unpriced.Add(float64(n)) }

// RatingError implements ledger.Observer.
func (m *Ledger) RatingError() { m.ratingErrors.Inc() }

// CollectDatabase registers tollgate_database_up with reg: a gauge, 1 when
// up reports that this process reaches its ledger database (with, for the
// meter and admin roles, the ledger's tables), else 0. up runs at each
// scrape, so the series says what the database is doing now, with or
// without traffic (the meter's series move only while events flow).
func CollectDatabase(reg prometheus.Registerer, up func() bool) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tollgate", Name: "database_up",
		Help: "1 when this process reached its ledger database at this scrape (and, for the meter and admin roles, found the ledger's tables), else 0."},
		func() float64 {
			if up() {
				return 1
			}
			return 0
		}))
}
