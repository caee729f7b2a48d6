package ledger_test

import (
	"strings"
	"testing"
)

// TestEventIDsCountByTimeReadsTheRangeAlone: reconciliation counts the
// dedupe keys in event_ids by occurred_at over the range it checks, and
// event_ids keeps every id ever stored. The count must be able to read
// the range's part of the table alone (migration 8's BRIN index): read
// whole, a month's reconciliation grew with the ledger's age. The planner
// is told not to read tables whole, so that the plan shows whether any
// other way exists.
func TestEventIDsCountByTimeReadsTheRangeAlone(t *testing.T) {
	plan := planWithoutSeqScans(t, `INSERT INTO event_ids (id, occurred_at)
		SELECT gen_random_uuid(), timestamptz '2026-01-01' + i * interval '1 minute' FROM generate_series(1, 20000) i`,
		"event_ids", `SELECT count(*) FROM event_ids WHERE occurred_at >= $1 AND occurred_at < $2`,
		"2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z")
	if !strings.Contains(plan, "event_ids_time_brin") {
		t.Fatalf("counting event_ids by occurred_at reads the whole table:\n%s", plan)
	}
}
