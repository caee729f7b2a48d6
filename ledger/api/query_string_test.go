package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestQueryStringsThatDoNotParseAreRefused: a query string url.Values
// does not parse whole is refused 400 invalid on the admin API and on the
// customer API, before any parameter is read. Go drops a pair with a bad
// %-escape, and the whole query past 10,000 parameters, so that the check
// of unknown and repeated parameters saw nothing and the handler ran
// unfiltered: ?to=2026-11-02% answered from Nov 1 on, for ever; with
// &pad=1 ×10000, every customer for all time; ?cursor=%%% restarted paging.
func TestQueryStringsThatDoNotParseAreRefused(t *testing.T) {
	s := newServer(t)
	id, _, secret := s.customer(`{"name":"q"}`)
	pad := strings.Repeat("&pad=1", 10000)
	malformed, tooMany := "malformed query string: ", "too many query parameters"
	for _, c := range []struct {
		url, auth, want string
	}{
		{s.admin + "/admin/v1/usage?customer_id=" + id + "&from=2026-11-01&to=2026-11-02%", adminToken, malformed},
		{s.admin + "/admin/v1/usage?customer_id=" + id + "&from=2026-11-01&to=2026-11-02" + pad, adminToken, tooMany},
		{s.admin + "/admin/v1/usage?cursor=%%%", adminToken, malformed},
		{s.admin + "/admin/v1/customers?name=a;b", adminToken, malformed},
		{s.admin + "/admin/v1/customers/" + id + "/entries?limit=1%zz", adminToken, malformed},
		{s.llm + "/v1/usage?from=2026-11-01&to=2026-11-02%", secret, malformed},
		{s.llm + "/v1/usage?from=2026-11-01&to=2026-11-02" + pad, secret, tooMany},
		{s.llm + "/v1/usage?cursor=%%%", secret, malformed},
		{s.llm + "/v1/requests?cursor=%%%", secret, malformed},
		{s.llm + "/v1/requests?limit=5" + pad, secret, tooMany},
		{s.llm + "/v1/statements/2026-11?x=%", secret, malformed},
		{s.llm + "/v1/balance?%", secret, malformed},
		// The key in the query, dropped with the rest: 400, not 401.
		{s.llm + "/v1/usage?key=" + secret + pad, "", tooMany},
	} {
		status, b, err := send("GET", c.url, c.auth, "")
		if err != nil {
			t.Fatal(err)
		}
		var e apiError
		if status != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Code != ledger.EInvalid || !strings.HasPrefix(e.Error.Message, c.want) {
			u := c.url
			if len(u) > 120 {
				u = u[:120] + "..."
			}
			t.Errorf("GET %s = %d %.200s; want 400 invalid %q", u, status, b, c.want)
		}
	}
	// A query that parses is still served.
	s.adm("GET", "/admin/v1/usage?customer_id="+id+"&from=2026-11-01&to=2026-11-02", "", http.StatusOK, nil)
	s.call("GET", s.llm+"/v1/usage?from=2026-11-01&to=2026-11-02", secret, "", http.StatusOK, nil)
}
