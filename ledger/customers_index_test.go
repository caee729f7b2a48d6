package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestCustomersPageReadsItsRowsAlone: a page of customers (the console's
// customers page, the admin API's list) is read in creation order after a
// cursor. Without an index on that order (migration 10) every page read
// and sorted the whole table, which grows with every customer an operator
// adds. The planner is told not to read tables whole, so that the plan
// shows whether another way exists; a sort step means the index does not
// give the order.
func TestCustomersPageReadsItsRowsAlone(t *testing.T) {
	ctx := context.Background()
	_, url := ledgertest.NewStoreURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO customers (name, created_at)
		SELECT 'customer ' || i, timestamptz '2026-01-01' + i * interval '1 second' FROM generate_series(1, 5000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE customers`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `EXPLAIN `+ledger.CustomersPageQueryForTest,
		"", "", time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC), "00000000-0000-0000-0000-000000000000", 26)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "customers_created_idx") || strings.Contains(plan, "Sort") {
		t.Fatalf("a page of customers reads and sorts the whole table:\n%s", plan)
	}
}
