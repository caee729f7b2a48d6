package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// planWithoutSeqScans fills a fresh migrated database with fill (SQL),
// analyzes table, and returns Postgres's plan for query with args, the
// planner told not to read tables whole: the plan shows whether an index
// serves the query at all, whatever the table's size.
func planWithoutSeqScans(t *testing.T, fill, table, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	_, url := ledgertest.NewStoreURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{fill, `VACUUM ANALYZE ` + table, `SET enable_seqscan = off`} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.Query(ctx, `EXPLAIN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
