package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestCLICustomersListPages: customers list lists every customer, past the
// admin API's page of 1000, following its cursors; --limit shows one page
// and the cursor to continue with (--cursor), --search finds customers by a
// part of the name or by id, and a --limit out of range is a usage error.
func TestCLICustomersListPages(t *testing.T) {
	s := newStack(t, nil) // one customer, "acme"
	ctx := context.Background()
	db, err := pgx.Connect(ctx, s.env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	const extra = 1500
	if _, err := db.Exec(ctx, `INSERT INTO customers (name, created_at)
		SELECT 'bulk-' || lpad(i::text, 4, '0'), now() + i * interval '1 millisecond' FROM generate_series(1, $1) i`, extra); err != nil {
		t.Fatal(err)
	}
	if rows := tableRows(t, s.tgOK("customers", "list"), "ID"); len(rows) != extra+1 || rows[0][1] != "acme" || rows[extra][1] != "bulk-1500" {
		t.Fatalf("customers list: %d rows; want acme and the %d others, oldest first", len(rows), extra)
	}
	var all ledger.CustomerPage
	s.tgJSON(&all, "customers", "list")
	if len(all.Data) != extra+1 || all.NextCursor != "" {
		t.Fatalf("customers list --json: %d customers, cursor %q; want all %d", len(all.Data), all.NextCursor, extra+1)
	}
	r := s.tg("customers", "list", "--limit", "2")
	rows := tableRows(t, r.out, "ID")
	cursor := regexp.MustCompile(`--cursor (\S+),`).FindStringSubmatch(r.errOut)
	if r.code != 0 || len(rows) != 2 || rows[0][1] != "acme" || rows[1][1] != "bulk-0001" || cursor == nil {
		t.Fatalf("customers list --limit 2: exit %d, rows %q, stderr %q; want acme, bulk-0001 and a cursor", r.code, rows, r.errOut)
	}
	var page ledger.CustomerPage
	s.tgJSON(&page, "customers", "list", "--cursor", cursor[1], "--limit", "3")
	if len(page.Data) != 3 || page.Data[0].Name != "bulk-0002" || page.NextCursor == "" {
		t.Fatalf("customers list --cursor: %+v; want bulk-0002 to 4 and a cursor", page)
	}
	if rows = tableRows(t, s.tgOK("customers", "list", "--search", "BULK-14"), "ID"); len(rows) != 100 || rows[0][1] != "bulk-1400" {
		t.Errorf("customers list --search BULK-14: %d rows; want bulk-1400 to 1499", len(rows))
	}
	if rows = tableRows(t, s.tgOK("customers", "list", "--search", s.customerID), "ID"); len(rows) != 1 || rows[0][1] != "acme" {
		t.Errorf("customers list --search ID: %q; want acme", rows)
	}
	s.tgFail(exitUsage, "--limit", "customers", "list", "--limit", "0")
	s.tgFail(exitUsage, "--limit", "customers", "list", "--limit", "10001")
}

// TestCLICustomersUpdateEmptyName: --name given empty (a script's
// --name "$NAME" with NAME unset) is a usage error, before anything is
// sent: alone it was "nothing to change: give --name", which it had been
// given, and beside --credit-limit it was dropped and the command exited
// 0 without the rename.
func TestCLICustomersUpdateEmptyName(t *testing.T) {
	for _, args := range [][]string{
		{"customers", "update", "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", "--name", ""},
		{"customers", "update", "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", "--name", " ", "--credit-limit", "5"},
	} {
		args = append(args, "--admin-url", "http://127.0.0.1:1")
		checkFail(t, runTollgate(t, nil, args...), exitUsage, "--name is empty", args)
	}
}
