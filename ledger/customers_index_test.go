package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestCustomersPageReadsItsRowsAlone: a page of customers (the console's
// customers page, the admin API's list) is read in creation order after a
// cursor. Without an index on that order (migration 10) every page read
// and sorted the whole table, which grows with every customer an operator
// adds. A sort step in the plan means the index does not give the order.
func TestCustomersPageReadsItsRowsAlone(t *testing.T) {
	plan := planWithoutSeqScans(t, `INSERT INTO customers (name, created_at)
		SELECT 'customer ' || i, timestamptz '2026-01-01' + i * interval '1 second' FROM generate_series(1, 5000) i`,
		"customers", ledger.CustomersPageQueryForTest,
		"", "", time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC), "00000000-0000-0000-0000-000000000000", 26)
	if !strings.Contains(plan, "customers_created_idx") || strings.Contains(plan, "Sort") {
		t.Fatalf("a page of customers reads and sorts the whole table:\n%s", plan)
	}
}
