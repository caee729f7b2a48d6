package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestCLIKeysListPages: keys list lists every key of a customer, past the
// admin API's page of 1000, following its cursors; --limit shows one page
// and the cursor to continue with (--cursor), and a --limit out of range
// is a usage error.
func TestCLIKeysListPages(t *testing.T) {
	s := newStack(t, nil) // one customer, "acme", with one key
	ctx := context.Background()
	db, err := pgx.Connect(ctx, s.env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	const extra = 1500
	if _, err := db.Exec(ctx, `INSERT INTO api_keys (customer_id, name, prefix, secret_hash, created_at)
		SELECT $1, 'bulk-' || lpad(i::text, 4, '0'), 'tg-' || substr(md5(i::text), 1, 8), sha256(('bulk-' || i)::bytea),
		  now() + i * interval '1 millisecond'
		FROM generate_series(1, $2) i`, s.customerID, extra); err != nil {
		t.Fatal(err)
	}
	if rows := tableRows(t, s.tgOK("keys", "list", "--customer", s.customerID), "ID"); len(rows) != extra+1 || rows[extra][1] != "bulk-1500" {
		t.Fatalf("keys list: %d rows; want the stack's key and the %d others, oldest first", len(rows), extra)
	}
	var all ledger.KeyPage
	s.tgJSON(&all, "keys", "list", "--customer", s.customerID)
	if len(all.Data) != extra+1 || all.NextCursor != "" {
		t.Fatalf("keys list --json: %d keys, cursor %q; want all %d", len(all.Data), all.NextCursor, extra+1)
	}
	r := s.tg("keys", "list", "--customer", s.customerID, "--limit", "2")
	rows := tableRows(t, r.out, "ID")
	cursor := regexp.MustCompile(`--cursor (\S+),`).FindStringSubmatch(r.errOut)
	if r.code != 0 || len(rows) != 2 || rows[1][1] != "bulk-0001" || cursor == nil {
		t.Fatalf("keys list --limit 2: exit %d, rows %q, stderr %q; want the stack's key, bulk-0001 and a cursor", r.code, rows, r.errOut)
	}
	var page ledger.KeyPage
	s.tgJSON(&page, "keys", "list", "--customer", s.customerID, "--cursor", cursor[1], "--limit", "3")
	if len(page.Data) != 3 || page.Data[0].Name != "bulk-0002" || page.NextCursor == "" {
		t.Fatalf("keys list --cursor: %+v; want bulk-0002 to 4 and a cursor", page)
	}
	s.tgFail(exitUsage, "--limit", "keys", "list", "--customer", s.customerID, "--limit", "0")
	s.tgFail(exitUsage, "--limit", "keys", "list", "--customer", s.customerID, "--limit", "10001")
}
