package api_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestQueryParametersRefused: every out-of-range or malformed query
// parameter (and rerate's body range) of the admin and customer APIs is
// a 400 naming the parameter, never a default, an empty page or a 500.
func TestQueryParametersRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, key, secret := s.customer(`{"name":"acme"}`)
	at := time.Date(2026, 1, 10, 10, 0, 0, 0, time.UTC)
	s.write(event(cust, key, "a", at, usage.Tokens{PromptTokens: 1}), event(cust, key, "b", at.Add(time.Hour), usage.Tokens{PromptTokens: 1}))
	var page ledger.UsagePage
	s.adm("GET", "/admin/v1/usage?group_by=model&limit=1", "", http.StatusOK, &page)
	if page.NextCursor == "" {
		t.Fatal("no next_cursor with two models and limit=1")
	}
	modelCursor := url.QueryEscape(page.NextCursor)
	forged := base64.RawURLEncoding.EncodeToString([]byte("no separators"))

	usageCases := []struct{ query, field string }{
		{"limit=0", "limit"},
		{"limit=-1", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"limit=5abc", "limit"},
		{"limit=1.5", "limit"},
		{"from=2026-02-01&to=2026-01-01", "from"},
		{"from=2026-01-01&to=2026-01-01", "from"},
		{"from=yesterday", "from"},
		{"to=2026-13-01", "to"},
		{"cursor=%21%21%21", "cursor"},
		{"cursor=" + forged, "cursor"},
		{"group_by=day&cursor=" + modelCursor, "cursor"},
		{"key_id=123", "key_id"},
		{"group_by=week", "group_by"},
	}
	for _, tc := range usageCases {
		status, body, err := send("GET", s.admin+"/admin/v1/usage?"+tc.query, adminToken, "")
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, "admin usage?"+tc.query, status, body, tc.field)
		status, body, err = send("GET", s.llm+"/v1/usage?"+tc.query, secret, "")
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, "customer usage?"+tc.query, status, body, tc.field)
	}
	for _, q := range []string{"customer_id=not-a-uuid", "customer_id=" + cust + "x"} {
		status, body, _ := send("GET", s.admin+"/admin/v1/usage?"+q, adminToken, "")
		invalid(t, "admin usage?"+q, status, body, "customer_id")
	}
	for q, field := range map[string]string{"customer_id=" + cust: "customer_id", "group_by=customer": "group_by"} {
		status, body, _ := send("GET", s.llm+"/v1/usage?"+q, secret, "")
		invalid(t, "customer usage?"+q, status, body, field)
	}
	// The bounds themselves, and the cursor with its own grouping, are fine.
	for _, q := range []string{"limit=1", "limit=1000", "limit=", "group_by=model&cursor=" + modelCursor} {
		s.adm("GET", "/admin/v1/usage?"+q, "", http.StatusOK, nil)
		s.call("GET", s.llm+"/v1/usage?"+q, secret, "", http.StatusOK, nil)
	}

	base := "/admin/v1/customers/" + cust
	for _, tc := range []struct{ method, path, body, field string }{
		{"GET", base + "/entries?from=2026-02-01&to=2026-01-01", "", "from"},
		{"GET", base + "/entries?from=2026-01-01&to=2026-01-01", "", "from"},
		{"GET", base + "/entries?from=soon", "", "from"},
		{"GET", "/admin/v1/customers/not-a-uuid/entries", "", "customer"},
		{"GET", base + "/statements/2026-13", "", "period"},
		{"GET", base + "/statements/2026-01?format=xml", "", "format"},
		{"GET", "/admin/v1/export?from=2026-01-01", "", "to"},
		{"GET", "/admin/v1/export?from=2026-02-01&to=2026-01-01", "", "from"},
		{"GET", "/admin/v1/reconciliation?to=2026-01-01", "", "from"},
		{"GET", "/admin/v1/reconciliation?from=2026-02-01&to=2026-01-01", "", "from"},
		{"POST", "/admin/v1/rerate", `{"to":"2026-02-01"}`, "from"},
		{"POST", "/admin/v1/rerate", `{"from":"2026-02-01"}`, "to"},
		{"POST", "/admin/v1/rerate", `{"from":"2026-02-01","to":"2026-01-01"}`, "from"},
		{"POST", "/admin/v1/rerate", `{"from":"2026-01-01","to":"later"}`, "to"},
	} {
		status, body, err := send(tc.method, s.admin+tc.path, adminToken, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, tc.method+" "+tc.path+" "+tc.body, status, body, tc.field)
	}
}

// TestUnknownQueryParametersRefused: a query parameter a route does not
// take was ignored, so a typo answered another question than the one
// asked: ?form=2026-01-01 read usage for all time, and ?from= given twice
// read the first. Both are 400 naming the parameter, on the admin and the
// customer API, whose key may still come as ?key=.
func TestUnknownQueryParametersRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, secret := s.customer(`{"name":"a","currency":"USD"}`)
	for _, c := range []struct{ url, auth, field string }{
		{s.admin + "/admin/v1/usage?form=2026-01-01&group_by=day", adminToken, "form"},
		{s.admin + "/admin/v1/usage?from=2026-01-01&from=2026-02-01", adminToken, "from"},
		{s.admin + "/admin/v1/customers/" + cust + "?expand=keys", adminToken, "expand"},
		{s.admin + "/admin/v1/export?from=2026-01-01&to=2026-02-01&customer_id=" + cust, adminToken, "customer_id"},
		{s.llm + "/v1/requests?modle=m", secret, "modle"},
		{s.llm + "/v1/usage?start=2026-01-01", secret, "start"},
		{s.llm + "/v1/balance?currency=USD", secret, "currency"},
	} {
		status, body, err := send("GET", c.url, c.auth, "")
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, c.url, status, body, c.field)
	}
	// A model filter that is not UTF-8 is the API's 400, not Postgres's
	// error text (found by review).
	status, body, _ := send("GET", s.admin+"/admin/v1/prices?model=%ff", adminToken, "")
	invalid(t, "prices?model=%ff", status, body, "model")
	// What the routes take, the key as a query parameter, and a health
	// probe with anything.
	s.adm("GET", "/admin/v1/usage?from=2026-01-01&group_by=day&limit=5", "", http.StatusOK, nil)
	s.call("GET", s.llm+"/v1/requests?model=m&limit=5", secret, "", http.StatusOK, nil)
	s.call("GET", s.llm+"/v1/balance?key="+secret, "", "", http.StatusOK, nil)
	s.call("GET", s.admin+"/healthz?probe=lb", "", "", http.StatusOK, nil)
	// An unauthenticated caller learns nothing of the routes' parameters.
	s.call("GET", s.llm+"/v1/usage?start=2026-01-01", "tg-wrong", "", http.StatusUnauthorized, nil)
	s.call("GET", s.admin+"/admin/v1/usage?form=2026-01-01", "wrong", "", http.StatusUnauthorized, nil)
}

// TestUnencodedPlusIsExplained: an offset's "+" sent unencoded in a query
// string arrives as a space; the 400 says to send it as %2B (a finance
// review: the message gave no hint), and the encoded form is taken.
func TestUnencodedPlusIsExplained(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	status, b, err := send("GET", s.admin+"/admin/v1/usage?from=2026-11-01T00:00:00+05:30&to=2026-12-01T00:00:00Z", adminToken, "")
	if err != nil || status != http.StatusBadRequest || !strings.Contains(string(b), "%2B") {
		t.Fatalf("an unencoded +: %d %s %v; want 400 saying to send %%2B", status, b, err)
	}
	status, b, err = send("GET", s.admin+"/admin/v1/usage?from=2026-11-01T00:00:00%2B05:00&to=2026-12-01T00:00:00Z", adminToken, "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("an encoded +: %d %s %v; want 200", status, b, err)
	}
}
