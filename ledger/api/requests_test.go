package api_test

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestCustomerRequests: with its own key a customer reads one of its
// requests, and pages through its request log newest first, filtered by
// key, model, end user and time; another customer's request is not found.
func TestCustomerRequests(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var p ledger.Price
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"2","effective_from":"2020-01-01T00:00:00Z"}`, http.StatusCreated, &p)
	a, aKey, aSecret := s.customer(`{"name":"a","currency":"USD"}`)
	b, bKey, bSecret := s.customer(`{"name":"b","currency":"USD"}`)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var mine []usage.Event
	for i := range 5 {
		e := event(a, aKey, "m", at.Add(time.Duration(i)*time.Minute), usage.Tokens{PromptTokens: 1000, CompletionTokens: 500})
		if i%2 == 0 {
			e.EndUser, e.Metadata = "alice", map[string]string{"team": "search"}
		}
		e.Provider, e.Deployment, e.Attempt = "internal-azure", "internal-azure/gpt-internal", 2
		mine = append(mine, e)
	}
	other := event(b, bKey, "m", at, usage.Tokens{PromptTokens: 1})
	s.write(append(mine, other)...)

	var one ledger.RatedEvent
	s.call("GET", s.llm+"/v1/requests/"+mine[0].ID, aSecret, "", http.StatusOK, &one)
	if one.ID != mine[0].ID || one.Usage.PromptTokens != 1000 || one.Cost != "0.002" || one.Currency != "USD" ||
		one.EndUser != "alice" || one.Metadata["team"] != "search" || one.Status != usage.StatusOK {
		t.Errorf("request = %+v, want its tokens, cost 0.002 USD, end user and tags", one)
	}
	// The operator's routing is not the customer's to see: GET /v1/usage
	// refuses to group by it, and the request log shows none of it.
	for _, path := range []string{"/v1/requests/" + mine[0].ID, "/v1/requests"} {
		_, body, err := send("GET", s.llm+path, aSecret, "")
		if err != nil || bytes.Contains(body, []byte("internal-azure")) || bytes.Contains(body, []byte(`"attempt"`)) {
			t.Errorf("GET %s = %s, %v; want no provider, deployment or attempt", path, body, err)
		}
	}
	s.call("GET", s.llm+"/v1/requests/"+other.ID, aSecret, "", http.StatusNotFound, nil)
	s.call("GET", s.llm+"/v1/requests/"+other.ID, bSecret, "", http.StatusOK, nil)
	s.call("GET", s.llm+"/v1/requests/not-a-uuid", aSecret, "", http.StatusBadRequest, nil)
	s.call("GET", s.llm+"/v1/requests/"+mine[0].ID, "tg-wrong", "", http.StatusUnauthorized, nil)

	// Two per page, newest first, to the end.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the cursor does not end")
		}
		var page ledger.RequestPage
		s.call("GET", s.llm+"/v1/requests?limit=2&cursor="+url.QueryEscape(cursor), aSecret, "", http.StatusOK, &page)
		for _, e := range page.Data {
			got = append(got, e.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(got) != 5 || got[0] != mine[4].ID || got[4] != mine[0].ID {
		t.Errorf("pages = %v, want the 5 requests of a, newest first", got)
	}

	var alice ledger.RequestPage
	s.call("GET", s.llm+"/v1/requests?end_user=alice&from=2026-03-01T10:01:00Z&to=2026-03-01T11:00:00Z", aSecret, "", http.StatusOK, &alice)
	if len(alice.Data) != 2 || alice.Data[0].ID != mine[4].ID || alice.Data[1].ID != mine[2].ID {
		t.Errorf("alice's requests from 10:01 = %d, want requests 4 and 2", len(alice.Data))
	}

	// By key: the log of one of the customer's keys. key_id was ignored,
	// answering every key's requests as if they were that key's.
	second, _ := s.key(a)
	s.write(event(a, second, "m", at.Add(time.Hour), usage.Tokens{PromptTokens: 7}))
	for _, c := range []struct {
		key  string
		want int
	}{{aKey, 5}, {second, 1}, {bKey, 0}, {"", 6}} {
		var page ledger.RequestPage
		s.call("GET", s.llm+"/v1/requests?limit=100&key_id="+c.key, aSecret, "", http.StatusOK, &page)
		if len(page.Data) != c.want {
			t.Errorf("?key_id=%s: %d requests, want %d", c.key, len(page.Data), c.want)
		}
		for _, e := range page.Data {
			if c.key != "" && e.KeyID != c.key {
				t.Errorf("?key_id=%s answered a request of key %s", c.key, e.KeyID)
			}
		}
	}
	for _, q := range []string{"limit=0", "limit=1001", "cursor=bogus", "from=2026-03-02&to=2026-03-01", "end_user=%00", "key_id=not-a-key"} {
		status, body, err := send("GET", s.llm+"/v1/requests?"+q, aSecret, "")
		if err != nil || status != http.StatusBadRequest {
			t.Errorf("?%s = %d %s, want 400", q, status, body)
		}
	}
}

// TestUsageByEndUser: usage grouped and filtered by end user, on the
// admin and the customer API, adds up to the rollups' totals, re-rating
// included.
func TestUsageByEndUser(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"2","effective_from":"2020-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	a, aKey, aSecret := s.customer(`{"name":"a","currency":"USD"}`)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var events []usage.Event
	for i, who := range []string{"alice", "bob", "alice", ""} {
		e := event(a, aKey, "m", at.Add(time.Duration(i)*time.Hour), usage.Tokens{PromptTokens: 1_000_000, CompletionTokens: 0})
		e.EndUser = who
		events = append(events, e)
	}
	s.write(events...)

	var page ledger.UsagePage
	s.adm("GET", "/admin/v1/usage?customer_id="+a+"&group_by=end_user", "", http.StatusOK, &page)
	want := map[string][2]any{"": {int64(1), "1"}, "alice": {int64(2), "2"}, "bob": {int64(1), "1"}}
	if len(page.Data) != 3 {
		t.Fatalf("groups = %+v, want 3", page.Data)
	}
	for _, r := range page.Data {
		w := want[r.Group]
		if r.EndUser != r.Group || r.Requests != w[0] || r.Cost != w[1] || r.Currency != "USD" {
			t.Errorf("group %q = %+v, want %v requests costing %v USD", r.Group, r, w[0], w[1])
		}
	}
	var alice ledger.UsagePage
	s.call("GET", s.llm+"/v1/usage?end_user=alice&group_by=day", aSecret, "", http.StatusOK, &alice)
	if len(alice.Data) != 1 || alice.Data[0].Requests != 2 || alice.Data[0].PromptTokens != 2_000_000 || alice.Data[0].Period != "2026-03-01" {
		t.Errorf("alice by day = %+v, want 2 requests of 1M prompt tokens on 2026-03-01", alice.Data)
	}
	var mine ledger.UsagePage
	s.call("GET", s.llm+"/v1/usage?group_by=end_user&limit=1", aSecret, "", http.StatusOK, &mine)
	if len(mine.Data) != 1 || mine.NextCursor == "" {
		t.Errorf("one group per page = %+v, want a cursor", mine)
	}

	// A price version back-dated over the events, re-rated: by end user
	// as by model (the rollups), each request now costs 2.
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"2","output":"2","effective_from":"2026-03-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/rerate", `{"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`, http.StatusOK, nil)
	var byUser, byModel ledger.UsagePage
	s.adm("GET", "/admin/v1/usage?customer_id="+a+"&group_by=end_user", "", http.StatusOK, &byUser)
	s.adm("GET", "/admin/v1/usage?customer_id="+a+"&group_by=model", "", http.StatusOK, &byModel)
	total := dec(t, "0")
	for _, r := range byUser.Data {
		total = total.Add(dec(t, r.Cost))
		if r.Group == "alice" && r.Cost != "4" {
			t.Errorf("alice after re-rating = %s, want 4", r.Cost)
		}
	}
	if len(byModel.Data) != 1 || !total.Equal(dec(t, byModel.Data[0].Cost)) || byModel.Data[0].Cost != "8" {
		t.Errorf("by end user after re-rating: %s in all; by model %+v; want 8 both", total, byModel.Data)
	}
	status, body, _ := send("GET", s.admin+"/admin/v1/usage?end_user=%ff", adminToken, "")
	invalid(t, "end_user=%ff", status, body, "end_user")
}
