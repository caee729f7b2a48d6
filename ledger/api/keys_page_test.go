package api_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// keyPage is an answer of GET /admin/v1/customers/{id}/keys.
type keyPage struct {
	Data       []ledger.Key `json:"data"`
	NextCursor *string      `json:"next_cursor"`
}

// manyKeys is how many keys TestKeysArePaged lists: enough for several
// pages at a small limit and a full default page.
const manyKeys = 1500

// TestKeysArePaged: a customer's key list answers a page at a time, 1000
// keys when no limit is given, oldest first, with a next_cursor for the
// keys after it (absent on the last page, and the data member as before,
// so that an old client reads the first page); following the cursors
// lists every key once, in order, keys created at one instant included;
// limits out of range and foreign cursors are 400, an unknown customer
// 404; the client's Keys follows the cursors and KeysPage reads one page.
// The list sent every key in one answer: with 100,000 keys the console's
// keys page was 239 MB.
func TestKeysArePaged(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	var cu ledger.Customer
	s.adm("POST", "/admin/v1/customers", `{"name":"many keys"}`, http.StatusCreated, &cu)
	db, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	// Three keys at most instants: pages must cut between them.
	if _, err := db.Exec(ctx, `INSERT INTO api_keys (customer_id, name, prefix, secret_hash, created_at)
		SELECT $1, 'key-' || lpad(i::text, 4, '0'), 'tg-' || substr(md5(i::text), 1, 8), sha256(i::text::bytea),
		  timestamptz '2026-01-01 00:00:00Z' + (i / 3) * interval '1 second'
		FROM generate_series(1, $2) i`, cu.ID, manyKeys); err != nil {
		t.Fatal(err)
	}
	path := "/admin/v1/customers/" + cu.ID + "/keys"
	get := func(q url.Values) keyPage {
		t.Helper()
		var p keyPage
		s.adm("GET", path+"?"+q.Encode(), "", http.StatusOK, &p)
		return p
	}
	// No limit: the first 1000, and a cursor.
	first := get(url.Values{})
	if len(first.Data) != ledger.DefaultKeyLimit || first.NextCursor == nil || *first.NextCursor == "" {
		t.Fatalf("the first page: %d keys, cursor %v; want %d and a cursor", len(first.Data), first.NextCursor, ledger.DefaultKeyLimit)
	}
	// Every page at 200: each key once, in order; no next_cursor on the last.
	var all []ledger.Key
	q := url.Values{"limit": {"200"}}
	for pages := 0; ; pages++ {
		if pages > manyKeys/200+1 {
			t.Fatalf("more than %d pages", pages)
		}
		p := get(q)
		if len(p.Data) > 200 || (p.NextCursor != nil && len(p.Data) != 200) {
			t.Fatalf("a page of %d keys, cursor %v; want 200 and a cursor, or the last page", len(p.Data), p.NextCursor)
		}
		all = append(all, p.Data...)
		if p.NextCursor == nil {
			break
		}
		q.Set("cursor", *p.NextCursor)
	}
	if len(all) != manyKeys {
		t.Fatalf("the pages list %d keys; want %d", len(all), manyKeys)
	}
	seen := map[string]bool{}
	for i, k := range all {
		if seen[k.ID] {
			t.Fatalf("key %s (%s) listed twice", k.ID, k.Name)
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
	// The largest limit: every key in one page; limit= is no limit given.
	if p := get(url.Values{"limit": {"10000"}}); len(p.Data) != manyKeys || p.NextCursor != nil {
		t.Errorf("limit=10000: %d keys, cursor %v; want all %d", len(p.Data), p.NextCursor, manyKeys)
	}
	if p := get(url.Values{"limit": {""}}); len(p.Data) != ledger.DefaultKeyLimit {
		t.Errorf("limit=: %d keys; want %d", len(p.Data), ledger.DefaultKeyLimit)
	}
	// Out of range and foreign values are refused, naming the parameter.
	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=10001", "limit"}, {"limit=-1", "limit"}, {"limit=x", "limit"},
		{"cursor=x", "cursor"}, {"cursor=MjAyNi0wMS0wMVQwMDowMDowMFogeA", "cursor"},
	} {
		status, body, _ := send("GET", s.admin+path+"?"+c.query, adminToken, "")
		invalid(t, c.query, status, body, c.field)
	}
	// An unknown customer is 404, paged or not; a customer without keys an empty list.
	for _, q := range []string{"", "?limit=5"} {
		if status, body, _ := send("GET", s.admin+"/admin/v1/customers/00000000-0000-0000-0000-000000000001/keys"+q, adminToken, ""); status != http.StatusNotFound {
			t.Errorf("an unknown customer's keys%s = %d %s; want 404", q, status, body)
		}
	}
	// A customer id that is not a UUID is 400 naming what is wrong, not a 500.
	if status, body, _ := send("GET", s.admin+"/admin/v1/customers/not-a-uuid/keys", adminToken, ""); status != http.StatusBadRequest {
		t.Errorf("the keys of customer not-a-uuid = %d %s; want 400", status, body)
	}
	var none ledger.Customer
	s.adm("POST", "/admin/v1/customers", `{"name":"no keys"}`, http.StatusCreated, &none)
	if b := s.adm("GET", "/admin/v1/customers/"+none.ID+"/keys", "", http.StatusOK, nil); string(b) != `{"data":[]}`+"\n" && string(b) != `{"data":[]}` {
		t.Errorf("a customer without keys: %s; want {\"data\":[]}", b)
	}

	// The client: Keys follows the cursors, KeysPage reads one page.
	cl := s.client()
	got, err := cl.Keys(ctx, cu.ID)
	if err != nil || len(got) != manyKeys || got[0].ID != all[0].ID || got[manyKeys-1].ID != all[manyKeys-1].ID {
		t.Errorf("the client's Keys: %d keys, %v; want the %d in order", len(got), err, manyKeys)
	}
	page, err := cl.KeysPage(ctx, cu.ID, ledger.KeyQuery{Limit: 7, Cursor: *first.NextCursor})
	if err != nil || len(page.Data) != 7 || page.Data[0].ID != all[ledger.DefaultKeyLimit].ID || page.NextCursor == "" {
		t.Errorf("the client's KeysPage(7, after the first page): %d keys, %v; want %s on and a cursor", len(page.Data), err, all[ledger.DefaultKeyLimit].Name)
	}
	rest, err := cl.AllKeys(ctx, cu.ID, ledger.KeyQuery{Limit: 300, Cursor: *first.NextCursor})
	if err != nil || len(rest) != manyKeys-ledger.DefaultKeyLimit || rest[0].ID != all[ledger.DefaultKeyLimit].ID {
		t.Errorf("the client's AllKeys(300, after the first page): %d keys, %v; want the last %d", len(rest), err, manyKeys-ledger.DefaultKeyLimit)
	}
	if _, err := cl.KeysPage(ctx, cu.ID, ledger.KeyQuery{Cursor: "bogus"}); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Errorf("the client's KeysPage(a bogus cursor) = %v; want invalid", err)
	}
}
