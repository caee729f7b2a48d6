package api_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// customerPage is an answer of GET /admin/v1/customers.
type customerPage struct {
	Data       []ledger.Customer `json:"data"`
	NextCursor string            `json:"next_cursor"`
}

// manyCustomers is how many customers TestCustomersArePaged lists: an
// operator's scale, at which the list sent in one answer was 20 MB.
const manyCustomers = 100_000

// TestCustomersArePaged: with 100,000 customers the customer list answers
// a page at a time, 1000 customers when no limit is given, oldest first,
// with a next_cursor for the customers after it; following the cursors
// lists every customer once, in order, customers created at one instant
// included; q finds customers by a part of their name in any case
// (its % and _ meaning themselves) or by id, and pages too; the client's
// Customers follows the cursors. The list read and sent every customer in
// one answer, which the console asked for on each of its pages.
func TestCustomersArePaged(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	// Three customers at most instants: pages must cut between them.
	if _, err := db.Exec(ctx, `INSERT INTO customers (name, created_at)
		SELECT 'cust-' || lpad(i::text, 6, '0'), timestamptz '2026-01-01 00:00:00Z' + (i / 3) * interval '1 second'
		FROM generate_series(1, $1) i`, manyCustomers); err != nil {
		t.Fatal(err)
	}
	var odd []ledger.Customer // names holding LIKE's wildcards
	for _, name := range []string{"50% off_deal", "50x offxdeal"} {
		c, err := s.store.CreateCustomer(ctx, ledger.CustomerInput{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		odd = append(odd, c)
	}
	total := manyCustomers + len(odd)

	get := func(q url.Values) (customerPage, int) {
		t.Helper()
		var p customerPage
		b := s.adm("GET", "/admin/v1/customers?"+q.Encode(), "", http.StatusOK, &p)
		return p, len(b)
	}
	// No limit: the first 1000, and a cursor; an answer of ~250 KB, not 20 MB.
	first, size := get(url.Values{})
	if len(first.Data) != ledger.DefaultCustomerLimit || first.NextCursor == "" || size > 400_000 {
		t.Fatalf("the first page: %d customers (%d bytes), cursor %q; want %d and a cursor",
			len(first.Data), size, first.NextCursor, ledger.DefaultCustomerLimit)
	}
	// Every page, at the largest limit: each customer once, in order.
	var all []ledger.Customer
	q := url.Values{"limit": {"10000"}}
	for pages := 0; ; pages++ {
		if pages > total/10000+1 {
			t.Fatalf("more than %d pages", pages)
		}
		p, _ := get(q)
		if len(p.Data) > 10000 || (p.NextCursor != "" && len(p.Data) != 10000) {
			t.Fatalf("a page of %d customers, cursor %q; want 10000 and a cursor, or the last page", len(p.Data), p.NextCursor)
		}
		all = append(all, p.Data...)
		if p.NextCursor == "" {
			break
		}
		q.Set("cursor", p.NextCursor)
	}
	if len(all) != total {
		t.Fatalf("the pages list %d customers; want %d", len(all), total)
	}
	seen := map[string]bool{}
	for i, c := range all {
		if seen[c.ID] {
			t.Fatalf("customer %s (%s) listed twice", c.ID, c.Name)
		}
		seen[c.ID] = true
		if i > 0 && (c.CreatedAt.Before(all[i-1].CreatedAt) || c.CreatedAt.Equal(all[i-1].CreatedAt) && c.ID < all[i-1].ID) {
			t.Fatalf("customer %d, %s, comes before the one listed ahead of it, %s", i, c.Name, all[i-1].Name)
		}
	}
	if !slices.EqualFunc(first.Data, all[:ledger.DefaultCustomerLimit], func(a, b ledger.Customer) bool { return a.ID == b.ID }) {
		t.Errorf("the first page without a limit is not the first 1000 customers")
	}
	names := func(cs []ledger.Customer) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Name
		}
		return out
	}
	// q: a part of the name in any case, or an id in any case; paged.
	var match []string // cust-042420 to 9, in the list's order
	for _, c := range all {
		if strings.HasPrefix(c.Name, "cust-04242") {
			match = append(match, c.Name)
		}
	}
	p, _ := get(url.Values{"q": {"CUST-04242"}, "limit": {"4"}})
	if len(match) != 10 || !slices.Equal(names(p.Data), match[:4]) || p.NextCursor == "" {
		t.Errorf("q=CUST-04242, limit 4: %v, cursor %q; want %v and a cursor", names(p.Data), p.NextCursor, match[:4])
	}
	p, _ = get(url.Values{"q": {"CUST-04242"}, "limit": {"4"}, "cursor": {p.NextCursor}})
	if !slices.Equal(names(p.Data), match[4:8]) {
		t.Errorf("q=CUST-04242, the second page: %v; want %v", names(p.Data), match[4:8])
	}
	target := all[77_777]
	if p, _ = get(url.Values{"q": {strings.ToUpper(target.ID)}}); len(p.Data) != 1 || p.Data[0].ID != target.ID || p.NextCursor != "" {
		t.Errorf("q=its id: %v; want %s alone", names(p.Data), target.Name)
	}
	if p, _ = get(url.Values{"q": {"% off_"}}); len(p.Data) != 1 || p.Data[0].ID != odd[0].ID {
		t.Errorf("q=%% off_: %v; want %q alone (%% and _ are no wildcards)", names(p.Data), odd[0].Name)
	}
	if p, _ = get(url.Values{"q": {"no such customer"}}); len(p.Data) != 0 || p.NextCursor != "" {
		t.Errorf("q matching none: %v, cursor %q", names(p.Data), p.NextCursor)
	}
	// name is still the exact name.
	if p, _ = get(url.Values{"name": {"cust-000500"}}); len(p.Data) != 1 || p.Data[0].Name != "cust-000500" {
		t.Errorf("name=cust-000500: %v", names(p.Data))
	}
	// Out of range and foreign values are refused, naming the parameter.
	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=10001", "limit"}, {"limit=x", "limit"},
		{"cursor=x", "cursor"}, {"cursor=MjAyNi0wMS0wMVQwMDowMDowMFogeA", "cursor"},
	} {
		status, body, _ := send("GET", s.admin+"/admin/v1/customers?"+c.query, adminToken, "")
		invalid(t, c.query, status, body, c.field)
	}
	// The client's Customers follows the cursors: every customer.
	got, err := s.client().Customers(ctx, "")
	if err != nil || len(got) != total || got[0].ID != all[0].ID || got[total-1].ID != all[total-1].ID {
		t.Errorf("the client's Customers: %d customers, %v; want the %d in order", len(got), err, total)
	}
	page, err := s.client().CustomersPage(ctx, ledger.CustomerQuery{Search: "off", Limit: 1})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != odd[0].ID || page.NextCursor == "" {
		t.Errorf("the client's CustomersPage(off, 1): %+v, %v; want %q and a cursor", page, err, odd[0].Name)
	}
}
