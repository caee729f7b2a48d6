package gateway

import "encoding/json"

// spendJournal is what a gateway journals of its spend counts
// (spendHolds.snapshot): for each key and customer with charges since its
// last state, those charges and the state's Version they count from, so
// that a restarted gateway counts them until a newer state holds them.
// Holds of requests in flight are not kept: a request cut by the restart
// ends in the crash journal's recovery, as its own event.
type spendJournal struct {
	Keys      map[string]spendCharged `json:"keys,omitempty"`
	Customers map[string]spendCharged `json:"customers,omitempty"`
}

// spendCharged is one spendCount's charges (nano-units of its currency),
// with the UTC day and month its day's and month's charges are of
// (utcDay, utcMonth).
type spendCharged struct {
	Version      int64 `json:"version"`
	Charged      int64 `json:"charged"`
	Day          int64 `json:"day"`
	DayCharged   int64 `json:"day_charged"`
	Month        int64 `json:"month"`
	MonthCharged int64 `json:"month_charged"`
}

// snapshot returns the JSON of the counts with charges, or nil when no
// charge changed since the last snapshot. The counts are copied under the
// lock, into a slice, and made into maps and encoded after it, so that
// requests' holds wait on the copy alone.
func (h *spendHolds) snapshot() []byte {
	type counted struct {
		id  string
		key bool
		c   spendCharged
	}
	h.mu.Lock()
	if h.changed == h.journaled {
		h.mu.Unlock()
		return nil
	}
	h.journaled = h.changed
	now := h.now()
	all := make([]counted, 0, len(h.keys)+len(h.customers))
	// A key's limits count its day's and month's charges, a customer's
	// credit all its charges: a count with none of those it is limited by
	// is left out, so that a key no state comes for again (revoked) is not
	// carried from restart to restart.
	for _, m := range [...]struct {
		counts countMap
		key    bool
	}{{h.keys, true}, {h.customers, false}} {
		for id, c := range m.counts {
			c.roll(now)
			if m.key && (c.dayCharged != 0 || c.monthCharged != 0) || !m.key && c.charged != 0 {
				all = append(all, counted{id, m.key, spendCharged{c.version, c.charged, c.day, c.dayCharged, c.month, c.monthCharged}})
			}
		}
	}
	h.mu.Unlock()
	j := spendJournal{Keys: map[string]spendCharged{}, Customers: map[string]spendCharged{}}
	for _, a := range all {
		if a.key {
			j.Keys[a.id] = a.c
		} else {
			j.Customers[a.id] = a.c
		}
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil
	}
	return b
}

// seed counts the charges an earlier process journaled (b, from
// snapshot; nothing when it does not decode), to be journaled again at
// the next snapshot. A state newer than a charge's Version, once applied,
// drops it, as it drops this process's own (spendHolds.arrived, count);
// an older one (a key bucket rebuilt) counts it too (count).
func (h *spendHolds) seed(b []byte) {
	var j spendJournal
	if len(b) == 0 || json.Unmarshal(b, &j) != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	for _, m := range [...]struct {
		to   countMap
		from map[string]spendCharged
	}{{h.keys, j.Keys}, {h.customers, j.Customers}} {
		for id, c := range m.from {
			// A day or month past tomorrow's (the last process's clock far
			// ahead, or a damaged record) would hold the key's limits in
			// it until this clock got there: its charges are dropped.
			if c.Day > utcDay(now)+1 {
				c.Day, c.DayCharged = 0, 0
			}
			if c.Month > utcMonth(now)+1 {
				c.Month, c.MonthCharged = 0, 0
			}
			// A charge is never negative (a refund is the ledger's, in a
			// state): one read so would lend the key what it never had.
			m.to[id] = &spendCount{version: c.Version, charged: max(c.Charged, 0), day: c.Day, dayCharged: max(c.DayCharged, 0),
				month: c.Month, monthCharged: max(c.MonthCharged, 0), seeded: true}
		}
	}
	h.changed++
}
