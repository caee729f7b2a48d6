package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestEntriesLimit: ?limit=n lists the latest n entries of the range,
// still oldest first, so that a page (the console's customer page) can
// show the latest without reading every one: after a re-rate, one entry
// per event, a customer's list was 17,584 entries.
func TestEntriesLimit(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"acme"}`)
	ctx := context.Background()
	c := s.client()
	var ids []int64
	for i := range 5 {
		e, err := c.AddEntry(ctx, cust, ledger.KindCredit, ledger.EntryInput{Amount: strconv.Itoa(i + 1), IdempotencyKey: "c" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	got, err := c.LatestEntries(ctx, cust, time.Time{}, time.Time{}, 2)
	if err != nil || len(got) != 2 || got[0].ID != ids[3] || got[1].ID != ids[4] {
		t.Fatalf("latest 2 = %+v (%v), want entries %d and %d", got, err, ids[3], ids[4])
	}
	if got, err = c.LatestEntries(ctx, cust, time.Time{}, time.Time{}, 10); err != nil || len(got) != 5 || got[0].ID != ids[0] {
		t.Fatalf("latest 10 of 5 = %+v (%v), want all 5 oldest first", got, err)
	}
	if got, err = c.LatestEntries(ctx, cust, time.Time{}, time.Now().Add(-time.Hour), 2); err != nil || len(got) != 0 {
		t.Fatalf("latest 2 before any = %+v (%v), want none", got, err)
	}
	for _, q := range []string{"0", "10001", "x"} {
		status, body, _ := send("GET", s.admin+"/admin/v1/customers/"+cust+"/entries?limit="+q, adminToken, "")
		invalid(t, "limit="+q, status, body, "limit")
	}
	s.adm("GET", "/admin/v1/customers/"+cust+"/entries", "", http.StatusOK, nil)
}
