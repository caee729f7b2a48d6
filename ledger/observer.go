package ledger

// Observer receives the ledger's measurements, for metrics; cmd/tollgate
// turns them into Prometheus series.
type Observer interface {
	// Unpriced is n events just stored with no price in force.
	Unpriced(n int)
	// RatingError is an event no price could rate (its cost overflows),
	// refused so that the worker sets it aside.
	RatingError()
}

// SetObserver has o receive the ledger's measurements.
func (s *Store) SetObserver(o Observer) { s.obs = o }
