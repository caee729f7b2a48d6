package web_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// countingWriter counts the bytes a handler writes.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

var (
	customerRow = regexp.MustCompile(`<td class="name"><a href="/console/customers/[0-9a-f-]{36}">([^<]+)</a>`)
	keysChoice  = regexp.MustCompile(`<li><a href="/console/keys\?customer=[0-9a-f-]{36}">([^<]+)</a>`)
	nextLink    = regexp.MustCompile(`<a href="([^"]+)" rel="next">Next page</a>`)
)

// TestConsoleCustomersPageWith100000Customers: with 100,000 customers the
// console's customers page shows one page of 25, oldest first, with a link
// to the next page and its search, and reads only that page from the admin
// API; the keys page's choice of customer is paged and searched alike. Both
// read every customer from the API for each page (18 MB at this scale) and
// the keys page sent all of them in one select.
func TestConsoleCustomersPageWith100000Customers(t *testing.T) {
	var listed atomic.Int64 // bytes of GET /admin/v1/customers answers
	g := newRigWrapped(t, nil, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/admin/v1/customers" {
				w = countingWriter{w, &listed}
			}
			next.ServeHTTP(w, r)
		})
	})
	ctx := context.Background()
	db, err := pgx.Connect(ctx, g.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `INSERT INTO customers (name, created_at)
		SELECT 'cust-' || lpad(i::text, 6, '0'), timestamptz '2026-01-01 00:00:00Z' + i * interval '1 second'
		FROM generate_series(1, 100000) i`); err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	get := func(path string) (body string, names []string, next string) {
		t.Helper()
		listed.Store(0)
		start := time.Now()
		status, body, _ := g.do(c, "GET", path, nil)
		want := http.StatusOK
		if strings.Contains(path, "cursor=bogus") {
			want = http.StatusBadRequest // a cursor the API did not make (TestConsoleBadQueryAnswers4xx)
		}
		if status != want {
			t.Fatalf("GET %s = %d %s; want %d", path, status, body, want)
		}
		// One page of 25 customers is about 5 KB of JSON; every customer was 18 MB.
		if n := listed.Load(); n > 50_000 {
			t.Errorf("GET %s read %d bytes of customers from the admin API; want one page", path, n)
		}
		t.Logf("GET %s: %v", path, time.Since(start))
		for _, m := range customerRow.FindAllStringSubmatch(body, -1) {
			names = append(names, m[1])
		}
		for _, m := range keysChoice.FindAllStringSubmatch(body, -1) {
			names = append(names, m[1])
		}
		if m := nextLink.FindStringSubmatch(body); m != nil {
			next = html.UnescapeString(m[1])
		}
		return body, names, next
	}
	seq := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, "cust-"+strings.Repeat("0", 6-len(itoa(i)))+itoa(i))
		}
		return out
	}

	body, names, next := get("/console/customers")
	if !slices.Equal(names, seq(1, 25)) || !strings.HasPrefix(next, "/console/customers?cursor=") {
		t.Fatalf("the first page: %v, next %q; want cust-000001 to 25 and a next page", names, next)
	}
	if strings.Contains(body, "First page") {
		t.Errorf("the first page links to the first page")
	}
	body, names, next = get(next)
	if !slices.Equal(names, seq(26, 50)) || next == "" || !strings.Contains(body, `<a href="/console/customers">First page</a>`) {
		t.Errorf("the second page: %v, next %q; want cust-000026 to 50, a next page and the first", names, next)
	}
	// A search: by a part of the name in any case, paged; by id.
	_, names, next = get("/console/customers?q=CUST-0999")
	if !slices.Equal(names, seq(99900, 99924)) || !strings.HasPrefix(next, "/console/customers?cursor=") || !strings.Contains(next, "q=CUST-0999") {
		t.Fatalf("q=CUST-0999: %v, next %q; want cust-099900 to 24 and the search's next page", names, next)
	}
	_, names, next = get(next)
	if !slices.Equal(names, seq(99925, 99949)) {
		t.Errorf("q=CUST-0999, the next page: %v; want cust-099925 to 49", names)
	}
	var id string
	if err := db.QueryRow(ctx, `SELECT id FROM customers WHERE name = 'cust-054321'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, names, next = get("/console/customers?q=" + strings.ToUpper(id)); !slices.Equal(names, []string{"cust-054321"}) || next != "" {
		t.Errorf("q=its id: %v, next %q; want cust-054321 alone", names, next)
	}
	// A cursor the API did not make: the error, not every customer.
	if body, names, _ = get("/console/customers?cursor=bogus"); len(names) != 0 || !strings.Contains(body, "cursor") {
		t.Errorf("a bogus cursor: %v", names)
	}

	// The keys page's choice of customer: a page, searched the same way.
	_, names, next = get("/console/keys")
	if !slices.Equal(names, seq(1, 25)) || !strings.HasPrefix(next, "/console/keys?cursor=") {
		t.Fatalf("the keys page's customers: %d, next %q; want cust-000001 to 25 and a next page", len(names), next)
	}
	if _, names, _ = get(next); !slices.Equal(names, seq(26, 50)) {
		t.Errorf("the keys page's next customers: %v", names)
	}
	if _, names, next = get("/console/keys?q=cust-05432"); !slices.Equal(names, seq(54320, 54329)) || next != "" {
		t.Errorf("the keys page, q=cust-05432: %v, next %q; want cust-054320 to 9 and no next page", names, next)
	}
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}
