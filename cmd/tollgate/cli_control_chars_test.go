package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCLITablesShowControlCharactersEscaped: an end user is named by the
// customer's own clients (the request's user or safety_identifier field,
// or X-Tollgate-End-User), and a tag by its metadata: text no operator
// chose, which `tollgate usage --group-by end_user` printed to the
// operator's terminal as it came. An audit's request naming its user
// "alice\x1b]0;pwned\x07\nmallory   999999 …" set the terminal's title
// and printed a second row, a forged end user with 999999 requests, under
// the real one. Every cell a table or a field list prints shows a control
// character escaped, on the row it belongs to.
func TestCLITablesShowControlCharactersEscaped(t *testing.T) {
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/admin/v1/usage":
			_, _ = w.Write([]byte(`{"data":[{"group":"alice\u001b]0;pwned\u0007\nmallory\t999999\u009b2J\u202e","requests":1,` +
				`"unpriced_requests":0,"prompt_tokens":1,"cached_tokens":0,"cache_write_tokens":0,"completion_tokens":1,` +
				`"reasoning_tokens":0,"web_search_requests":0,"cost":"0.000001","currency":"USD"}]}`))
		case "/admin/v1/customers/0197a3c2-1111-7222-8333-444455556666":
			_, _ = w.Write([]byte(`{"id":"0197a3c2-1111-7222-8333-444455556666","name":"acme\u001b[2J\r\nName: forged",` +
				`"currency":"USD","credit_limit":null,"created_at":"2026-12-05T00:00:00Z","updated_at":"2026-12-05T00:00:00Z"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer admin.Close()
	env := map[string]string{"TOLLGATE_ADMIN_URL": admin.URL, "TOLLGATE_ADMIN_TOKEN": testAdminToken}
	for _, args := range [][]string{
		{"usage", "--customer", "0197a3c2-1111-7222-8333-444455556666", "--group-by", "end_user", "--from", "2026-12-01"},
		{"customers", "get", "0197a3c2-1111-7222-8333-444455556666"},
	} {
		r := runTollgate(t, env, args...)
		if r.code != exitOK {
			t.Fatalf("%v: exit %d, %s", args, r.code, r.errOut)
		}
		if i := strings.IndexFunc(r.out, func(c rune) bool {
			return c != '\n' && (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == '\u202e')
		}); i >= 0 {
			t.Errorf("%v printed control character %q:\n%q", args, []rune(r.out[i:])[0], r.out)
		}
		if strings.Contains(r.out, "\nmallory") || strings.Contains(r.out, "\nName: forged") {
			t.Errorf("%v printed a value's line break as a row of its own:\n%s", args, r.out)
		}
	}
}

// TestCLIJSONShowsTerminalControlsEscaped: --json output is JSON, read by
// programs and by people in a terminal alike. encoding/json escapes the
// C0 controls but writes the C1 ones (U+0080 to U+009F) and the
// bidirectional overrides as they are: a customer-named end user holding
// U+009B (a terminal's CSI, "\u009b2J" clears the screen where C1 is
// honoured) or U+202E (which shows the rest of the line reversed) reached
// the operator's terminal raw. They are written as \u escapes, which
// decode to the same strings.
func TestCLIJSONShowsTerminalControlsEscaped(t *testing.T) {
	const group = "alice\u009b2J\u0085x\u202edcba\u2066y\u200fz"
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body, _ := json.Marshal(map[string]any{"data": []map[string]any{{"group": group, "requests": 1, "unpriced_requests": 0,
			"prompt_tokens": 1, "cached_tokens": 0, "cache_write_tokens": 0, "completion_tokens": 1, "reasoning_tokens": 0,
			"web_search_requests": 0, "cost": "0.000001", "currency": "USD"}}})
		_, _ = w.Write(body)
	}))
	defer admin.Close()
	env := map[string]string{"TOLLGATE_ADMIN_URL": admin.URL, "TOLLGATE_ADMIN_TOKEN": testAdminToken}
	r := runTollgate(t, env, "usage", "--customer", "0197a3c2-1111-7222-8333-444455556666", "--group-by", "end_user",
		"--from", "2026-12-01", "--json")
	if r.code != exitOK {
		t.Fatalf("usage --json: exit %d, %s", r.code, r.errOut)
	}
	if i := strings.IndexFunc(r.out, func(c rune) bool {
		return c >= 0x80 && c < 0xa0 || c == 0x200e || c == 0x200f || c >= 0x202a && c <= 0x202e || c >= 0x2066 && c <= 0x2069
	}); i >= 0 {
		t.Errorf("usage --json printed %q raw:\n%q", []rune(r.out[i:])[0], r.out)
	}
	var got struct{ Data []struct{ Group string } }
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || len(got.Data) != 1 || got.Data[0].Group != group {
		t.Errorf("usage --json decodes to %+v (%v); want the group %q as the API sent it", got, err, group)
	}
}
