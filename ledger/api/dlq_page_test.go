package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestDLQPages: GET /admin/v1/dlq pages as the other lists do: 25 dead
// letters read 10 at a time, each page asked for with the previous one's
// next_cursor, are all 25 once, in order, and the last page has no
// next_cursor; every answer fits openapi.json. A cursor that is not a
// sequence is a 400 naming it. The list gave the oldest limit letters and
// nothing past them: with more than 10,000 set aside, the rest could not
// be seen, nor what was left after replaying the first page.
func TestDLQPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, deadLetter := newDLQServer(t)
	c := newContract(t)
	var seqs []uint64
	for i := range 25 {
		seqs = append(seqs, deadLetter(`{"v":7,"n":`+strconv.Itoa(i)+`}`, "schema version 7"))
	}
	type page struct {
		Data       []usage.DeadLetter `json:"data"`
		NextCursor *string            `json:"next_cursor"`
	}
	list := func(q string) page {
		t.Helper()
		var p page
		if err := json.Unmarshal(c.check("GET", s.admin+"/admin/v1/dlq?"+q, adminToken, "", http.StatusOK), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	var got []uint64
	var cursors []string
	q := "limit=10"
	for range 5 {
		p := list(q)
		for _, l := range p.Data {
			got = append(got, l.Seq)
		}
		if p.NextCursor == nil {
			cursors = append(cursors, "")
			break
		}
		cursors = append(cursors, *p.NextCursor)
		q = "limit=10&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if len(got) != 25 || len(cursors) != 3 || cursors[0] == "" || cursors[1] == "" || cursors[2] != "" {
		t.Fatalf("pages gave %v with next_cursor %q; want the 25 letters in 3 pages, the last without next_cursor", got, cursors)
	}
	for i := range got {
		if got[i] != seqs[i] {
			t.Fatalf("letter %d is sequence %d, want %d (all: %v)", i, got[i], seqs[i], got)
		}
	}
	// Exactly limit letters left: that page is the last.
	if p := list("limit=5&cursor=" + url.QueryEscape(cursors[1])); len(p.Data) != 5 || p.NextCursor != nil {
		t.Fatalf("the last 5 letters, 5 a page: %d letters, next_cursor %v; want 5 and none", len(p.Data), p.NextCursor)
	}

	// What is left after replaying the first page is listed from the start.
	_, err := s.client().RemoveDeadLetters(ctx, seqs[:10])
	noErr(t, "RemoveDeadLetters", err)
	if p := list("limit=10"); len(p.Data) != 10 || p.Data[0].Seq != seqs[10] || p.NextCursor == nil {
		t.Fatalf("after removing the first page: %+v", p)
	}

	for _, bad := range []string{"abc", "-1", "0", "1.5", "+3", "18446744073709551616"} {
		b := c.check("GET", s.admin+"/admin/v1/dlq?cursor="+url.QueryEscape(bad), adminToken, "", http.StatusBadRequest)
		if !strings.Contains(string(b), "cursor") {
			t.Errorf("cursor=%s: %s; want an error naming cursor", bad, b)
		}
	}
	// A limit out of 1 to MaxDeadLetterLimit (10,000) is refused, not read.
	for _, bad := range []string{"0", "10001", "x"} {
		b := c.check("GET", s.admin+"/admin/v1/dlq?limit="+bad, adminToken, "", http.StatusBadRequest)
		if !strings.Contains(string(b), "limit") {
			t.Errorf("limit=%s: %s; want an error naming limit", bad, b)
		}
	}
}
