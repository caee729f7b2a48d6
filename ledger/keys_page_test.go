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

// insertKeys adds n keys of customer to the database at url, three
// created at each instant from 2026-01-01 (so that pages must cut between
// keys of one instant), named prefix-0001 on.
func insertKeys(t *testing.T, url, customer, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO api_keys (customer_id, name, prefix, secret_hash, created_at)
		SELECT $1, $2 || '-' || lpad(i::text, 4, '0'), 'tg-' || substr(md5($2 || i), 1, 8), sha256(($2 || '-' || i)::bytea),
		  timestamptz '2026-01-01 00:00:00Z' + (i / 3) * interval '1 second'
		FROM generate_series(1, $3) i`, customer, prefix, n); err != nil {
		t.Fatal(err)
	}
}

// TestKeysPage: a customer's keys are read a page at a time, oldest first
// (by creation, then id); following the cursors lists each of its keys
// once, in order, keys created at one instant included, and no other
// customer's. The list read every key of the customer in one answer: with
// 100,000 keys, a 239 MB console page.
func TestKeysPage(t *testing.T) {
	s, url := ledgertest.NewStoreURL(t)
	ctx := context.Background()
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "many keys"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2500
	insertKeys(t, url, c.ID, "k", n)
	insertKeys(t, url, other.ID, "o", 50)
	made, _, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "made now"}) // the newest: last
	if err != nil {
		t.Fatal(err)
	}

	// No limit: DefaultKeyLimit, and a cursor.
	first, err := s.KeysPage(ctx, c.ID, ledger.KeyQuery{})
	if err != nil || len(first.Data) != ledger.DefaultKeyLimit || first.NextCursor == "" {
		t.Fatalf("KeysPage(no limit) = %d keys, cursor %q, %v; want %d and a cursor",
			len(first.Data), first.NextCursor, err, ledger.DefaultKeyLimit)
	}
	// Every page, at 700: each key once, in order.
	var all []ledger.Key
	q := ledger.KeyQuery{Limit: 700}
	for pages := 0; ; pages++ {
		if pages > (n+1)/700+1 {
			t.Fatalf("more than %d pages", pages)
		}
		p, err := s.KeysPage(ctx, c.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Data) > 700 || (p.NextCursor != "" && len(p.Data) != 700) {
			t.Fatalf("a page of %d keys, cursor %q; want 700 and a cursor, or the last page", len(p.Data), p.NextCursor)
		}
		all = append(all, p.Data...)
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	if len(all) != n+1 || all[n].ID != made.ID {
		t.Fatalf("the pages list %d keys (the last %s); want %d, the one made now last", len(all), all[len(all)-1].Name, n+1)
	}
	seen := map[string]bool{}
	for i, k := range all {
		if seen[k.ID] || k.CustomerID != c.ID {
			t.Fatalf("key %s (%s, customer %s) listed twice or of another customer", k.ID, k.Name, k.CustomerID)
		}
		seen[k.ID] = true
		if i > 0 && (k.CreatedAt.Before(all[i-1].CreatedAt) || k.CreatedAt.Equal(all[i-1].CreatedAt) && k.ID < all[i-1].ID) {
			t.Fatalf("key %d, %s, comes before the one listed ahead of it, %s", i, k.Name, all[i-1].Name)
		}
	}
	for i, k := range first.Data {
		if k.ID != all[i].ID {
			t.Fatalf("the first page without a limit is not the first %d keys", ledger.DefaultKeyLimit)
		}
	}
	// The largest limit, in one page; a page of one.
	if p, err := s.KeysPage(ctx, c.ID, ledger.KeyQuery{Limit: ledger.MaxKeyLimit}); err != nil || len(p.Data) != n+1 || p.NextCursor != "" {
		t.Errorf("KeysPage(limit %d) = %d keys, cursor %q, %v; want all %d, no cursor", ledger.MaxKeyLimit, len(p.Data), p.NextCursor, err, n+1)
	}
	if p, err := s.KeysPage(ctx, c.ID, ledger.KeyQuery{Limit: 1, Cursor: first.NextCursor}); err != nil || len(p.Data) != 1 ||
		p.Data[0].ID != all[ledger.DefaultKeyLimit].ID || p.NextCursor == "" {
		t.Errorf("KeysPage(limit 1, the first page's cursor) = %+v, %v; want key %s and a cursor", p, err, all[ledger.DefaultKeyLimit].Name)
	}
	// Limits out of range and cursors it did not make: EInvalid, naming the field.
	for _, bad := range []ledger.KeyQuery{{Limit: -1}, {Limit: ledger.MaxKeyLimit + 1}, {Cursor: "x"},
		{Cursor: "MjAyNi0wMS0wMVQwMDowMDowMFogeA"}, {Cursor: first.NextCursor + "="}} {
		_, err := s.KeysPage(ctx, c.ID, bad)
		field := "cursor"
		if bad.Limit != 0 {
			field = "limit"
		}
		if ledger.ErrorCode(err) != ledger.EInvalid || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("KeysPage(%+v) = %v; want invalid %s", bad, err, field)
		}
	}
	// An unknown customer is not found; one without keys has an empty page.
	if _, err := s.KeysPage(ctx, "00000000-0000-0000-0000-000000000001", ledger.KeyQuery{}); ledger.ErrorCode(err) != ledger.ENotFound {
		t.Errorf("KeysPage(unknown customer) = %v; want not found", err)
	}
	none, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "no keys"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.KeysPage(ctx, none.ID, ledger.KeyQuery{}); err != nil || p.Data == nil || len(p.Data) != 0 || p.NextCursor != "" {
		t.Errorf("KeysPage(a customer without keys) = %+v, %v; want an empty list", p, err)
	}
	// Past the last key: an empty page, not an error.
	lastCursor := ledger.KeyPage{}
	if lastCursor, err = s.KeysPage(ctx, c.ID, ledger.KeyQuery{Limit: n}); err != nil || lastCursor.NextCursor == "" {
		t.Fatalf("KeysPage(limit %d) = %d keys, cursor %q, %v", n, len(lastCursor.Data), lastCursor.NextCursor, err)
	}
	if p, err := s.KeysPage(ctx, c.ID, ledger.KeyQuery{Limit: 1, Cursor: lastCursor.NextCursor}); err != nil || len(p.Data) != 1 || p.NextCursor != "" {
		t.Errorf("the last page = %d keys, cursor %q, %v; want the one made now and no cursor", len(p.Data), p.NextCursor, err)
	}
}

// TestKeysPageReadsItsRowsAlone: a page of a customer's keys is read in
// creation order after a cursor. With only api_keys_customer_idx
// (customer_id) every page read and sorted all the customer's keys;
// migration 11's index gives the order. A sort step in the plan means
// the index does not give it.
func TestKeysPageReadsItsRowsAlone(t *testing.T) {
	const customer = "0197a3c2-0000-7000-8000-000000000001"
	plan := planWithoutSeqScans(t, `
		INSERT INTO customers (id, name) VALUES ('`+customer+`', 'many keys');
		INSERT INTO api_keys (customer_id, name, prefix, secret_hash, created_at)
		SELECT '`+customer+`', 'k' || i, 'tg-' || substr(md5(i::text), 1, 8), sha256(i::text::bytea),
		  timestamptz '2026-01-01' + i * interval '1 second' FROM generate_series(1, 5000) i`,
		"api_keys", ledger.KeysPageQueryForTest,
		customer, time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC), "00000000-0000-0000-0000-000000000000", 26)
	if !strings.Contains(plan, "api_keys_customer_created_idx") || strings.Contains(plan, "Sort") {
		t.Fatalf("a page of keys reads and sorts all the customer's keys:\n%s", plan)
	}
}
