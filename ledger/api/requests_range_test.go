package api_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestCustomerRequestsRangeAndFilters: a customer's request log (GET
// /v1/requests) lists exactly the requests of [from, to), from within an
// hour: one at from is listed, one at to is not. With a key or model
// filter (read hour by hour from the rollups) the hour holding from is
// read too, and another customer's request of the same model and hour is
// never listed. (Mutation audit survivors: from made exclusive; the hours
// of a key's log taken from from rather than its hour, which lost the
// requests of from's hour.)
func TestCustomerRequestsRangeAndFilters(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a, aKey, aSecret := s.customer(`{"name":"a"}`)
	b, bKey, _ := s.customer(`{"name":"b"}`)
	from := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
	to := from.Add(time.Hour)
	u := usage.Tokens{PromptTokens: 10}
	atFrom, within := event(a, aKey, "m", from, u), event(a, aKey, "m", from.Add(15*time.Minute), u)
	s.write(atFrom, within,
		event(a, aKey, "m", from.Add(-time.Minute), u), // before from
		event(a, aKey, "m", to, u),                     // at to: after the range
		event(b, bKey, "m", from.Add(15*time.Minute), u))

	rng := "from=" + url.QueryEscape(from.Format(time.RFC3339)) + "&to=" + url.QueryEscape(to.Format(time.RFC3339))
	want := []string{within.ID, atFrom.ID} // newest first
	for _, filter := range []string{"", "&key_id=" + aKey, "&model=m", "&key_id=" + aKey + "&model=m"} {
		var page ledger.RequestPage
		s.call("GET", s.llm+"/v1/requests?"+rng+filter, aSecret, "", http.StatusOK, &page)
		var got []string
		for _, e := range page.Data {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("/v1/requests?%s%s = %v, want %v (the requests at from and within the range)", rng, filter, got, want)
		}
	}
}
