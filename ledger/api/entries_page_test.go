package api_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// entryPage is an answer of GET /admin/v1/customers/{id}/entries.
type entryPage struct {
	Data       []ledger.Entry `json:"data"`
	NextCursor string         `json:"next_cursor"`
}

// TestEntriesArePaged: the entry list answers a page at a time, 1000
// entries when no limit is given, the latest first, each page oldest first,
// with a next_cursor for the entries before it; following it lists every
// entry once, entries at one instant included; limit without a cursor is
// still the latest that many, and the client's Entries follows the cursors.
// The list sent every entry of the range in one answer, built in memory:
// 40,000 entries after a re-rate were a 10.7 MB response.
func TestEntriesArePaged(t *testing.T) {
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"paged"}`)
	ctx := context.Background()
	const n = 1003
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				// Three entries at each instant: pages must cut between them.
				in := ledger.EntryInput{Amount: "1", EffectiveAt: base.Add(time.Duration(i/3) * time.Second), IdempotencyKey: "p" + strconv.Itoa(i)}
				if _, err := s.store.AddEntry(ctx, cust, ledger.KindCredit, in); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	all, err := s.store.Entries(ctx, cust, time.Time{}, time.Time{})
	if err != nil || len(all) != n {
		t.Fatalf("the store's entries: %d, %v", len(all), err)
	}
	ids := func(es []ledger.Entry) []int64 {
		out := make([]int64, len(es))
		for i, e := range es {
			out[i] = e.ID
		}
		return out
	}
	path := "/admin/v1/customers/" + cust + "/entries"
	get := func(query string) entryPage {
		t.Helper()
		var p entryPage
		s.adm("GET", path+query, "", http.StatusOK, &p)
		return p
	}
	// Every page, following the cursors, with no limit and with a small one.
	for _, limit := range []string{"", "7"} {
		var pages [][]ledger.Entry
		q := url.Values{}
		if limit != "" {
			q.Set("limit", limit)
		}
		for {
			p := get("?" + q.Encode())
			want := 1000
			if limit != "" {
				want = 7
			}
			if len(p.Data) > want || (p.NextCursor != "" && len(p.Data) != want) {
				t.Fatalf("limit %q: a page of %d entries, next cursor %q; want %d and a cursor, or the last page", limit, len(p.Data), p.NextCursor, want)
			}
			pages = append(pages, p.Data)
			if p.NextCursor == "" {
				break
			}
			q.Set("cursor", p.NextCursor)
		}
		if limit == "" && len(pages) != 2 {
			t.Errorf("no limit: %d pages of %d entries; want 1000, then 3", len(pages), n)
		}
		slices.Reverse(pages)
		if got := ids(slices.Concat(pages...)); !slices.Equal(got, ids(all)) {
			t.Errorf("limit %q: the pages, last first, list %d entries, want the %d in order", limit, len(got), n)
		}
	}
	// limit without a cursor: the latest that many, oldest first.
	if p := get("?limit=2"); !slices.Equal(ids(p.Data), ids(all[n-2:])) || p.NextCursor == "" {
		t.Errorf("limit=2: %v, cursor %q; want the latest two, %v, and a cursor", ids(p.Data), p.NextCursor, ids(all[n-2:]))
	}
	// A range: its pages end at its start.
	from := base.Add(300 * time.Second)
	p := get("?limit=1000&from=" + url.QueryEscape(from.Format(time.RFC3339)))
	if p.NextCursor != "" || len(p.Data) != n-900 || !p.Data[0].EffectiveAt.Equal(from) {
		t.Errorf("from %s: %d entries, cursor %q; want the %d from it and no cursor", from, len(p.Data), p.NextCursor, n-900)
	}
	// Not cursors: not base64, no entry id, and entry id 0 (no entry has
	// it: a forged cursor, which was taken).
	for _, c := range []string{"x", "MjAyNi0wMS0wMVQwMDowMDowMFogeA", "MjAyNi0wMS0wMVQwMDowMDowMFogMA"} {
		status, body, _ := send("GET", s.admin+path+"?cursor="+c, adminToken, "")
		invalid(t, "cursor="+c, status, body, "cursor")
	}
	// The client follows the cursors.
	got, err := s.client().Entries(ctx, cust, time.Time{}, time.Time{})
	if err != nil || !slices.Equal(ids(got), ids(all)) {
		t.Errorf("the client's Entries: %d entries, %v; want the %d in order", len(got), err, n)
	}
}
