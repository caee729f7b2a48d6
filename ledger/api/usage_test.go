package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

var groupings = []string{"model", "key", "customer", "hour", "day", "month"}

// usageRows reads every page of a usage query (limit 1, to page too).
func (s *server) usageRows(base, auth, query string) []ledger.UsageRow {
	s.t.Helper()
	var rows []ledger.UsageRow
	cursor := ""
	for {
		var page ledger.UsagePage
		s.call("GET", base+"?limit=1&"+query+"&cursor="+url.QueryEscape(cursor), auth, "", http.StatusOK, &page)
		rows = append(rows, page.Data...)
		if cursor = page.NextCursor; cursor == "" {
			return rows
		}
	}
}

// checkOneRowPerGroup fails unless each group is one row, or one row per
// real currency, with its unpriced usage inside; it returns the rows by
// group and currency.
func checkOneRowPerGroup(t *testing.T, what string, rows []ledger.UsageRow, wantRequests, wantUnpriced int64) map[[2]string]ledger.UsageRow {
	t.Helper()
	byKey := map[[2]string]ledger.UsageRow{}
	currencies := map[string][]string{}
	var requests, unpriced int64
	for _, r := range rows {
		k := [2]string{r.Group, r.Currency}
		if _, dup := byKey[k]; dup {
			t.Errorf("%s: group %s in %q twice", what, r.Group, r.Currency)
		}
		byKey[k] = r
		currencies[r.Group] = append(currencies[r.Group], r.Currency)
		requests, unpriced = requests+r.Requests, unpriced+r.UnpricedRequests
		if r.Requests == 0 {
			t.Errorf("%s: an empty row %+v", what, r)
		}
	}
	for g, cs := range currencies {
		for _, c := range cs {
			if (c == "" || c == "-") && len(cs) > 1 {
				t.Errorf("%s: group %s is split into an unpriced row and a priced one: %q", what, g, cs)
			}
		}
	}
	if requests != wantRequests || unpriced != wantUnpriced {
		t.Errorf("%s: %d requests, %d unpriced; want %d and %d", what, requests, unpriced, wantRequests, wantUnpriced)
	}
	return byKey
}

// TestUsageOneRowPerGroup: for every grouping, in the admin and the
// customer usage API, a group's unpriced usage is counted in its row
// (unpriced_requests), and only different real currencies split a group;
// after re-rating prices it, no empty row is left behind.
func TestUsageOneRowPerGroup(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a, keyA, secretA := s.customer(`{"name":"a"}`)
	keyA2, _ := s.key(a)
	b, keyB, _ := s.customer(`{"name":"b"}`)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"1","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers/"+b+"/overrides", `{"model":"m","price":{"currency":"EUR","input":"2","output":"2"},"effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	at := time.Date(2026, 3, 10, 10, 15, 0, 0, time.UTC)
	u := usage.Tokens{PromptTokens: 1000}
	s.write(
		event(a, keyA, "m", at, u), event(a, keyA, "m", at.Add(time.Minute), u), // 0.001 USD each
		event(a, keyA, "free", at, u), // no price: unpriced
		event(a, keyA2, "free", at, u),
		event(b, keyB, "m", at, u), // 0.002 EUR
		event(b, keyB, "free", at, u),
	)

	period := map[string]string{"hour": "2026-03-10T10:00:00Z", "day": "2026-03-10", "month": "2026-03"}
	for _, g := range groupings {
		rows := checkOneRowPerGroup(t, "admin "+g, s.usageRows(s.admin+"/admin/v1/usage", adminToken, "group_by="+g), 6, 3)
		want := map[string][]ledger.UsageRow{
			"model": {{Group: "m", Currency: "EUR", Requests: 1, Cost: "0.002"}, {Group: "m", Currency: "USD", Requests: 2, Cost: "0.002"},
				{Group: "free", Currency: "", Requests: 3, UnpricedRequests: 3, Cost: "0"}},
			"key": {{Group: keyA, Currency: "USD", Requests: 3, UnpricedRequests: 1, Cost: "0.002"},
				{Group: keyA2, Currency: "", Requests: 1, UnpricedRequests: 1, Cost: "0"},
				{Group: keyB, Currency: "EUR", Requests: 2, UnpricedRequests: 1, Cost: "0.002"}},
			"customer": {{Group: a, Currency: "USD", Requests: 4, UnpricedRequests: 2, Cost: "0.002"},
				{Group: b, Currency: "EUR", Requests: 2, UnpricedRequests: 1, Cost: "0.002"}},
		}[g]
		if p := period[g]; p != "" { // one period, in two real currencies: the unpriced join EUR, the first
			want = []ledger.UsageRow{{Group: p, Currency: "EUR", Requests: 4, UnpricedRequests: 3, Cost: "0.002"},
				{Group: p, Currency: "USD", Requests: 2, Cost: "0.002"}}
		}
		for _, w := range want {
			r, ok := rows[[2]string{w.Group, w.Currency}]
			if !ok || r.Requests != w.Requests || r.UnpricedRequests != w.UnpricedRequests || r.Cost != w.Cost ||
				r.PromptTokens != 1000*w.Requests {
				t.Errorf("admin %s: row %s %q = %+v, want %+v", g, w.Group, w.Currency, r, w)
			}
		}
		if len(rows) != len(want) {
			t.Errorf("admin %s: %d rows, want %d", g, len(rows), len(want))
		}
		for _, r := range rows { // by customer, each row names its customer
			if name := map[string]string{a: "a", b: "b"}[r.CustomerID]; r.CustomerName != name || (g == "customer") != (name != "") {
				t.Errorf("admin %s: row %+v, want customer_name %q", g, r, name)
			}
		}
	}

	// One customer in one currency: exactly one row per group, in both APIs.
	for _, g := range groupings {
		want := map[string]int{"model": 2, "key": 2, "customer": 1}[g]
		if want == 0 {
			want = 1
		}
		rows := checkOneRowPerGroup(t, "admin "+g+" of a", s.usageRows(s.admin+"/admin/v1/usage", adminToken, "customer_id="+a+"&group_by="+g), 4, 2)
		if len(rows) != want {
			t.Errorf("admin %s of a: %d rows, want %d", g, len(rows), want)
		}
		if g == "customer" {
			continue
		}
		rows = checkOneRowPerGroup(t, "customer "+g, s.usageRows(s.llm+"/v1/usage", secretA, "group_by="+g), 4, 2)
		if len(rows) != want {
			t.Errorf("customer %s: %d rows, want %d", g, len(rows), want)
		}
		if g == "hour" {
			if r := rows[[2]string{period[g], "USD"}]; r.Requests != 4 || r.UnpricedRequests != 2 || r.Cost != "0.002" {
				t.Errorf("customer hour row = %+v, want 4 requests, 2 unpriced, cost 0.002 USD", r)
			}
		}
	}

	// Priced by re-rating, the unpriced usage moves to the USD rows and no
	// empty row is left.
	s.adm("POST", "/admin/v1/prices", `{"model":"free","currency":"USD","input":"1","output":"1","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/rerate", `{"from":"2026-03-01","to":"2026-04-01"}`, http.StatusOK, nil)
	for _, g := range groupings {
		rows := checkOneRowPerGroup(t, "after rerate, admin "+g, s.usageRows(s.admin+"/admin/v1/usage", adminToken, "group_by="+g), 6, 0)
		for k, r := range rows {
			if k[1] == "" {
				t.Errorf("after rerate, admin %s: an unpriced row %+v", g, r)
			}
		}
	}
}

// TestUsageRangeIsExactOrWholeHours: a usage query read from the events
// (by end user, deployment or provider, or filtered by end user) counts
// exactly the events in [from, to), on the admin and the customer API.
// One read from the hourly rollups counts exactly too for one customer
// (the customer API's, or the admin API's with customer_id): the whole
// hours from the rollups, the parts of an hour from the events. Across
// customers it refuses a bound that is not a whole UTC hour rather than
// widen the range to the hour and count usage outside it.
func TestUsageRangeIsExactOrWholeHours(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, key, secret := s.customer(`{"name":"acme"}`)
	hour := time.Date(2026, 1, 10, 21, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{10 * time.Minute, 30*time.Minute + 30*time.Second, 45 * time.Minute} {
		e := event(cust, key, "m", hour.Add(at), usage.Tokens{PromptTokens: 1})
		e.EndUser = "alice"
		s.write(e)
	}
	// Two more in the next hours, without an end user: 22:20 and 23:05.
	for _, at := range []time.Duration{80 * time.Minute, 125 * time.Minute} {
		s.write(event(cust, key, "m", hour.Add(at), usage.Tokens{PromptTokens: 1}))
	}
	total := func(base, auth, query string) int64 {
		var n int64
		for _, r := range s.usageRows(base, auth, query) {
			n += r.Requests
		}
		return n
	}
	q := func(from, to time.Time) string {
		return "from=" + url.QueryEscape(from.Format(time.RFC3339)) + "&to=" + url.QueryEscape(to.Format(time.RFC3339))
	}
	minute := q(hour.Add(30*time.Minute), hour.Add(31*time.Minute)) // 21:30 to 21:31: one event
	admin, mine := s.admin+"/admin/v1/usage", s.llm+"/v1/usage"
	for _, g := range []string{"group_by=end_user", "group_by=model&end_user=alice", "group_by=hour&end_user=alice"} {
		if n := total(admin, adminToken, g+"&"+minute); n != 1 {
			t.Errorf("admin usage?%s&%s = %d requests, want the 1 of 21:30", g, minute, n)
		}
		if n := total(mine, secret, g+"&"+minute); n != 1 {
			t.Errorf("customer usage?%s&%s = %d requests, want the 1 of 21:30", g, minute, n)
		}
	}
	for _, g := range []string{"group_by=deployment", "group_by=provider"} {
		if n := total(admin, adminToken, g+"&"+minute); n != 1 {
			t.Errorf("admin usage?%s&%s = %d requests, want the 1 of 21:30", g, minute, n)
		}
	}
	// An unknown grouping on the customer API lists only what it serves:
	// the ledger's message offered customer, deployment and provider,
	// which this API then refused.
	body := s.call("GET", mine+"?group_by=bogus", secret, "", http.StatusBadRequest, nil)
	if want := `group_by: \"bogus\" is not one of model, key, hour, day, month, end_user"`; !strings.Contains(string(body), want) {
		t.Errorf("customer usage?group_by=bogus: %s; want %s", body, want)
	}
	for _, g := range []string{"model", "key", "hour", "day", "month", "end_user"} {
		s.call("GET", mine+"?group_by="+g, secret, "", http.StatusOK, nil)
	}

	whole := q(hour, hour.Add(time.Hour))
	ist := time.FixedZone("IST", 5*3600+1800)
	for _, g := range groupings {
		if n := total(admin, adminToken, "group_by="+g+"&"+whole); n != 3 {
			t.Errorf("admin usage?group_by=%s&%s = %d requests, want 3", g, whole, n)
		}
		for _, tc := range []struct {
			query, field string // field: the bound within an hour ("" when both are whole)
			want         int64
		}{
			{minute, "from", 1},
			{q(hour, hour.Add(31*time.Minute)), "to", 2},
			{q(hour.In(ist), hour.Add(time.Hour)), "", 3}, // 21:00 UTC is 02:30 IST: whole
			{q(time.Date(2026, 1, 11, 0, 0, 0, 0, ist), hour.Add(4*time.Hour)), "from", 5},
			{q(hour.Add(40*time.Minute), hour.Add(2*time.Hour)), "from", 2},                    // 21:45 (events), 22:20 (rollups)
			{q(hour.Add(40*time.Minute), hour.Add(130*time.Minute)), "from", 3},                // and 23:05 (events)
			{q(hour.Add(-20*time.Minute), hour.Add(125*time.Minute)), "from", 4},               // 23:05 is the end: not counted
			{q(hour.Add(time.Hour), hour.Add(2*time.Hour+5*time.Minute+time.Second)), "to", 2}, // 22:20, 23:05
		} {
			query := "group_by=" + g + "&" + tc.query
			for _, api := range []struct{ base, auth, filter string }{
				{admin, adminToken, ""}, {admin, adminToken, "&customer_id=" + cust}, {mine, secret, ""},
			} {
				if api.base == mine && g == "customer" {
					continue // not a grouping of the customer API
				}
				status, body, err := send("GET", api.base+"?"+query+api.filter, api.auth, "")
				if err != nil {
					t.Fatal(err)
				}
				if tc.field == "" || api.base == mine || api.filter != "" {
					if status != http.StatusOK {
						t.Errorf("%s?%s%s = %d %s, want 200", api.base, query, api.filter, status, body)
					} else if n := total(api.base, api.auth, query+api.filter); n != tc.want {
						t.Errorf("%s?%s%s = %d requests, want %d", api.base, query, api.filter, n, tc.want)
					}
					continue
				}
				invalid(t, api.base+"?"+query, status, body, tc.field+": usage by "+g+" across customers is summed per UTC hour")
			}
		}
	}
}

// TestUsageCursorAfterTheEmptyGroup: a usage page that ends with the
// group "" in currency "" (events with no end user, all of an unpriced
// model) returns a cursor that decodes to ("", ""), which Usage read as
// "no cursor": the next page was the first page again, and a client
// following next_cursor (Client.UsageAll) never ended.
func TestUsageCursorAfterTheEmptyGroup(t *testing.T) {
	s := newServer(t)
	cust, keyID, secret := s.customer(`{"name":"acme"}`)
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	tok := usage.Tokens{PromptTokens: 10, CompletionTokens: 5}
	noUser := event(cust, keyID, "unpriced-model", at, tok)
	alice := event(cust, keyID, "unpriced-model", at, tok)
	alice.EndUser = "alice"
	s.write(noUser, alice)

	for _, base := range []string{
		s.admin + "/admin/v1/usage?customer_id=" + cust + "&",
		s.llm + "/v1/usage?",
	} {
		auth := adminToken
		if base[:len(s.llm)] == s.llm {
			auth = secret
		}
		var groups []string
		cursor := ""
		for i := 0; i < 5; i++ {
			var page ledger.UsagePage
			s.call("GET", base+"group_by=end_user&limit=1&cursor="+url.QueryEscape(cursor), auth, "", http.StatusOK, &page)
			for _, r := range page.Data {
				groups = append(groups, r.Group+"/"+r.Currency)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(groups) != 2 {
			t.Errorf("%s group_by=end_user limit=1, following next_cursor: groups %q (5 pages, still a cursor: %v); want 2 groups \"\" and \"alice\", then no cursor",
				base, groups, cursor != "")
		}
	}
}

// TestUsageWithinAnHourIsExactToTheNanosecond: the API takes RFC 3339
// times with any fraction of a second, but Postgres keeps microseconds and
// pgx truncated a bound: from=21:00:00.000000001Z counted the event of
// 21:00:00Z, before from, and to=22:00:00.000000001Z left out the event of
// 22:00:00Z, before to, for the rollup groupings (their parts of an hour
// read from the events) and the groupings read from the events alike.
// (Found by review.)
func TestUsageWithinAnHourIsExactToTheNanosecond(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, key, secret := s.customer(`{"name":"acme"}`)
	hour := time.Date(2026, 1, 10, 21, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{hour, hour.Add(30 * time.Minute), hour.Add(time.Hour)} {
		s.write(event(cust, key, "m", at, usage.Tokens{PromptTokens: 1}))
	}
	q := func(from, to time.Time) string {
		return "from=" + url.QueryEscape(from.Format(time.RFC3339Nano)) + "&to=" + url.QueryEscape(to.Format(time.RFC3339Nano))
	}
	for _, tc := range []struct {
		query string
		want  int64
	}{
		{q(hour.Add(time.Nanosecond), hour.Add(time.Hour)), 1},                 // 21:30 only: 21:00 is before from
		{q(hour.Add(30*time.Minute), hour.Add(time.Hour+time.Nanosecond)), 2},  // 21:30 and 22:00, before to
		{q(hour.Add(-time.Hour), hour.Add(time.Hour+999*time.Nanosecond)), 3},  // all three
		{q(hour.Add(time.Nanosecond), hour.Add(time.Hour+time.Nanosecond)), 2}, // 21:30, 22:00
	} {
		for _, g := range []string{"model", "hour", "end_user"} {
			for _, api := range []struct{ base, auth, filter string }{
				{s.admin + "/admin/v1/usage", adminToken, "&customer_id=" + cust}, {s.llm + "/v1/usage", secret, ""},
			} {
				query := "group_by=" + g + "&" + tc.query + api.filter
				status, body, err := send("GET", api.base+"?"+query, api.auth, "")
				if err != nil {
					t.Fatal(err)
				}
				if status != http.StatusOK {
					t.Errorf("%s?%s = %d %s, want 200", api.base, query, status, body)
					continue
				}
				var n int64
				for _, r := range s.usageRows(api.base, api.auth, query) {
					n += r.Requests
				}
				if n != tc.want {
					t.Errorf("%s?%s = %d requests (%s), want %d", api.base, query, n, body, tc.want)
				}
			}
		}
	}
}
