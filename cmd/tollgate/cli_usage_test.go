package main

import (
	"net"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestCLIUsageAndEvents: usage as a table and as JSON (one page and --all),
// events get for a request's X-Request-Id, and credits refund-event.
func TestCLIUsageAndEvents(t *testing.T) {
	s := newStack(t, nil)
	_, reqID := s.chatAs(s.secret)
	s.event(reqID)
	_, reqID2 := s.chatAs(s.secret)
	s.event(reqID2)

	rows := tableRows(t, s.tgOK("usage", "--customer", s.customerID), "MODEL")
	// MODEL REQUESTS UNPRICED PROMPT CACHED CACHE WRITE COMPLETION REASONING WEB SEARCHES COST CURRENCY
	if len(rows) != 1 || rows[0][0] != "sim-pro" || rows[0][1] != "2" || rows[0][len(rows[0])-2] != "0.000525" {
		t.Fatalf("usage: %q", rows)
	}
	var page ledger.UsagePage
	s.tgJSON(&page, "usage", "--customer", s.customerID, "--group-by", "day")
	if len(page.Data) != 1 || page.Data[0].Requests != 2 || page.Data[0].PromptTokens != 24 || page.NextCursor != "" {
		t.Fatalf("usage --json: %+v", page)
	}
	// Two keys, one group per page: --all follows the cursor.
	_, _, other := s.customer(`{"name":"second"}`, `{"name":"k"}`)
	s.refreshKeys()
	_, reqID3 := s.chatAs(other)
	s.event(reqID3)
	r := s.tg("usage", "--group-by", "customer", "--limit", "1")
	if r.code != exitOK || len(tableRows(t, r.out, "CUSTOMER")) != 1 || !strings.Contains(r.errOut, "--cursor") {
		t.Fatalf("usage --limit 1: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	// --limit 0 was taken as the server's default (a new operator's review).
	for _, n := range []string{"0", "-3", "1001"} {
		s.tgFail(exitUsage, "is not from 1 to 1000", "usage", "--group-by", "customer", "--limit", n)
	}
	s.tgJSON(&page, "usage", "--group-by", "customer", "--limit", "1", "--all")
	if len(page.Data) != 2 || page.Data[0].CustomerID == page.Data[1].CustomerID {
		t.Fatalf("usage --all --json: %+v", page)
	}
	if rows := tableRows(t, s.tgOK("usage", "--group-by", "customer", "--limit", "1", "--all"), "CUSTOMER"); len(rows) != 2 {
		t.Fatalf("usage --all: %q", rows)
	}
	// Grouped by customer, each row names its customer.
	out := s.tgOK("usage", "--group-by", "customer", "--all")
	rows = tableRows(t, out, "CUSTOMER")
	names := map[string]string{}
	for _, r := range rows {
		names[r[0]] = r[1]
	}
	if header := strings.Fields(out); len(rows) != 2 || header[1] != "NAME" || names[s.customerID] != "acme" || !strings.Contains(out, "second") {
		t.Fatalf("usage --group-by customer:\n%s", out)
	}
	if page.Data[0].CustomerName == "" || page.Data[1].CustomerName == "" {
		t.Fatalf("usage --group-by customer --json: no customer_name: %+v", page)
	}

	out = s.tgOK("events", "get", reqID)
	if field(t, out, "ID") != reqID || field(t, out, "Prompt tokens") != "12" || field(t, out, "Cost") != "0.0002625 USD" ||
		field(t, out, "List cost") != "0.0002625 USD" || field(t, out, "Charged when rated") != "0.0002625 USD" {
		t.Fatalf("events get:\n%s", out)
	}
	var e ledger.RatedEvent
	s.tgJSON(&e, "events", "get", reqID)
	if e.ID != reqID || e.CustomerID != s.customerID || e.Usage.CompletionTokens != 24 {
		t.Fatalf("events get --json: %+v", e)
	}
	out = s.tgOK("credits", "refund-event", reqID, "--memo", "upstream outage")
	if field(t, out, "Kind") != ledger.KindRefund || field(t, out, "Refers to") != "event "+reqID {
		t.Fatalf("refund-event:\n%s", out)
	}
	// Once per event: a second refund is the first one.
	if again := s.tgOK("credits", "refund-event", reqID); field(t, again, "Entry") != field(t, out, "Entry") {
		t.Fatalf("refund-event twice:\n%s\n%s", out, again)
	}
}

// TestCLIExitCodes: each failure class has its exit code and one line on
// stderr with the API's message.
func TestCLIExitCodes(t *testing.T) {
	s := newStack(t, nil)
	const missing = "00000000-0000-7000-8000-000000000000"
	s.tgFail(exitNotFound, "customer "+missing+" not found", "customers", "get", missing)
	s.tgFail(exitNotFound, "not found", "events", "get", missing)
	s.tgFail(exitNotFound, "not found", "credits", "reverse", "999999")
	// An id that is not an id, as an argument or a flag, is checked before
	// anything is sent: a bad argument (the API refuses it too, before any
	// query: ledger/api's tests).
	for _, args := range [][]string{{"customers", "get", "nope"}, {"customers", "balance", "nope"},
		{"keys", "revoke", "nope"}, {"events", "get", "nope"}, {"credits", "refund-event", "nope"}} {
		s.tgFail(exitUsage, `"nope" is not an id`, args...)
	}
	s.tgFail(exitUsage, `"nope" is not an id`, "keys", "list", "--customer", "nope")
	s.tgFail(exitUsage, `"nope" is not an id`, "credits", "grant", "--customer", "nope", "--amount", "5")
	s.tgFail(exitUsage, "not an entry id", "credits", "reverse", "abc")
	s.tgFail(exitUsage, `amount: "-3" is negative`, "credits", "grant", "--customer", s.customerID, "--amount", "-3")
	s.tgFail(exitInvalid, "amount", "credits", "grant", "--customer", s.customerID, "--amount", "0") // a decimal: the API's rules say no
	s.tgFail(exitInvalid, "currency", "customers", "create", "--name", "x", "--currency", "dollars")
	s.tgFail(exitInvalid, "group", "usage", "--group-by", "week")
	s.tgOK("credits", "grant", "--customer", s.customerID, "--amount", "1", "--idempotency-key", "same")
	s.tgFail(exitConflict, "idempotency_key", "credits", "adjust", "--customer", s.customerID, "--amount", "2", "--idempotency-key", "same")

	// Usage errors are caught before anything is sent.
	s.tgFail(exitUsage, "flag provided but not defined", "customers", "list", "--bogus")
	s.tgFail(exitUsage, "--name is required", "customers", "create")
	s.tgFail(exitUsage, "missing CUSTOMER_ID", "customers", "get")
	s.tgFail(exitUsage, "not both", "customers", "update", s.customerID, "--credit-limit", "1", "--no-credit-limit")
	s.tgFail(exitUsage, "--effective-from", "prices", "create", "--model", "m", "--currency", "USD", "--input", "1", "--output", "1", "--effective-from", "yesterday")
	s.tgFail(exitUsage, "not both", "overrides", "create", "--customer", s.customerID, "--discount-percent", "5", "--input", "1", "--effective-from", "2026-01-01")
	s.tgFail(exitUsage, "invalid value", "usage", "--limit", "many")
	s.tgFail(exitUsage, "unknown command", "customers", "delete")
	s.tgFail(exitUsage, "unknown command", "frobnicate")
	s.tgFail(exitUsage, "--admin-url", "customers", "list", "--admin-url", "127.0.0.1:8081")

	wrongToken := map[string]string{"TOLLGATE_ADMIN_URL": s.admin, "TOLLGATE_ADMIN_TOKEN": "wrong"}
	checkFail(t, runTollgate(t, wrongToken, "customers", "list"), exitUnauthorized, "admin token", nil)
	// --token wins over the environment.
	if r := runTollgate(t, wrongToken, "customers", "list", "--token", testAdminToken); r.code != exitOK {
		t.Fatalf("--token: exit %d, %s", r.code, r.errOut)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	checkFail(t, runTollgate(t, nil, "customers", "list", "--admin-url", closed), exitUnreachable, "cannot reach the admin API at "+closed, nil)
	checkFail(t, runTollgate(t, map[string]string{"TOLLGATE_ADMIN_URL": closed}, "balance", "--customer", s.customerID), exitUnreachable, "connection refused", nil)
}
