package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countingAdmin is an admin API that answers every request status and
// body, and counts them: the environment that points the CLI at it, and
// the count.
func countingAdmin(t *testing.T, status int, body string) (map[string]string, *atomic.Int32) {
	t.Helper()
	sent := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		http.Error(w, body, status)
	}))
	t.Cleanup(srv.Close)
	return map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": "t"}, sent
}

// TestCLIIdArgumentsCheckedBeforeSending: an id given as a positional
// argument went to the server unchecked, `customers get not-a-uuid` exiting
// 5 on its 400, where `--customer x` exits 2 locally (a user's walkthrough).
// Every command taking an id argument (a CUSTOMER_ID, KEY_ID or EVENT_ID)
// now refuses one that is not a UUID, as the flag does, sending nothing;
// one the admin API would refuse too (32 hex digits, no dashes) included.
func TestCLIIdArgumentsCheckedBeforeSending(t *testing.T) {
	env, sent := countingAdmin(t, http.StatusBadRequest, `{"error":{"code":"invalid","message":"not a UUID"}}`)
	checked := 0
	for _, cmd := range commands() {
		arg := strings.Fields(cmd.args)[0]
		if cmd.nargs == 0 || !strings.HasSuffix(arg, "_ID") || arg == "ENTRY_ID" { // credits reverse: an integer, checked apart
			continue
		}
		checked++
		for _, id := range []string{"not-a-uuid", "0197a3c2aaaa7bbb8cccddddeeeeffff"} {
			args := append(strings.Fields(cmd.name), id)
			checkFail(t, runTollgate(t, env, args...), exitUsage, arg+`: "`+id+`" is not an id`, args)
		}
	}
	if checked < 8 {
		t.Errorf("%d commands take an id argument, want the 8 of customers, keys, events and credits", checked)
	}
	if n := sent.Load(); n > 0 {
		t.Errorf("%d requests sent for ids that are not ids", n)
	}
	// The flag is checked the same way.
	args := []string{"keys", "list", "--customer", "0197a3c2aaaa7bbb8cccddddeeeeffff"}
	checkFail(t, runTollgate(t, env, args...), exitUsage, `is not an id`, args)
}

// TestCLIConflictingAndOutOfRangeValuesRefusedBeforeSending: a limit given
// both ways (--daily-limit and --no-daily-limit, --expires-at and
// --no-expires-at) and an ENTRY_ID below 1 are usage errors (exit 2), with
// nothing sent: one of the two was silently dropped, or entry 0 was asked
// for and answered "not found" (exit 3) (a mutation audit: only
// --rpm-limit's pair and "abc" were tried).
func TestCLIConflictingAndOutOfRangeValuesRefusedBeforeSending(t *testing.T) {
	env, sent := countingAdmin(t, http.StatusNotFound, `{"error":{"code":"not_found","message":"not found"}}`)
	const key = "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff"
	for _, c := range []struct {
		want string
		args []string
	}{
		{"give --daily-limit or --no-daily-limit, not both", []string{"keys", "update", key, "--daily-limit", "5", "--no-daily-limit"}},
		{"give --expires-at or --no-expires-at, not both", []string{"keys", "update", key, "--expires-at", "2030-01-01", "--no-expires-at"}},
		{`ENTRY_ID: "0" is not an entry id`, []string{"credits", "reverse", "0"}},
		{`ENTRY_ID: "-1" is not an entry id`, []string{"credits", "reverse", "--", "-1"}},
	} {
		checkFail(t, runTollgate(t, env, c.args...), exitUsage, c.want, c.args)
	}
	if n := sent.Load(); n > 0 {
		t.Errorf("%d requests sent for values refused", n)
	}
}
