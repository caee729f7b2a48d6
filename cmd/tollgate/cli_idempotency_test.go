package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCLICreatesOnceWithAnIdempotencyKey: `customers create` and `keys
// create` take --idempotency-key, so that a script retrying one after a
// lost answer makes no second customer or key: the customer's retry shows
// the same customer, the key's exits 4 (conflict) naming the key made and
// saying to revoke it if its secret was lost.
func TestCLICreatesOnceWithAnIdempotencyKey(t *testing.T) {
	s := newStack(t, nil)
	create := []string{"customers", "create", "--name", "hooli", "--idempotency-key", "onboard-hooli"}
	id := field(t, s.tgOK(create...), "ID")
	if again := field(t, s.tgOK(create...), "ID"); again != id {
		t.Fatalf("customers create retried with its idempotency key made customer %s, want %s again", again, id)
	}
	if rows := tableRows(t, s.tgOK("customers", "list", "--name", "hooli"), "ID"); len(rows) != 1 {
		t.Fatalf("%d customers named hooli after a retried create, want 1", len(rows))
	}
	key := []string{"keys", "create", "--customer", id, "--name", "ci", "--idempotency-key", "onboard-hooli-ci"}
	keyID := field(t, s.tgOK(key...), "ID")
	r := s.tg(key...)
	if r.code != exitConflict || !strings.Contains(r.errOut, keyID) || !strings.Contains(r.errOut, "revoke") {
		t.Fatalf("keys create retried with its idempotency key: exit %d, stderr %q; want %d naming key %s and saying to revoke it",
			r.code, r.errOut, exitConflict, keyID)
	}
	if rows := tableRows(t, s.tgOK("keys", "list", "--customer", id), "ID"); len(rows) != 1 {
		t.Fatalf("%d keys after a retried create, want 1", len(rows))
	}
}

// TestCLIRetriedCreateIsNotCalledNew: `customers create` notes another
// customer of the same name saying "this one is new ... if it was made by
// mistake, leave it unused". A retry with the idempotency key answers the
// customer the first run made, which is neither new nor a mistake: told
// so, an operator would leave the very customer the script onboarded
// unused (the README's block run again, after an older customer of the
// name).
func TestCLIRetriedCreateIsNotCalledNew(t *testing.T) {
	s := newStack(t, nil)
	older := field(t, s.tgOK("customers", "create", "--name", "initech"), "ID") // made without a key, before
	create := []string{"customers", "create", "--name", "initech", "--idempotency-key", "onboard-initech"}
	id := field(t, s.tgOK(create...), "ID")
	r := s.tg(create...)
	if r.code != exitOK || field(t, r.out, "ID") != id {
		t.Fatalf("customers create retried with its idempotency key: exit %d, stdout %q; want customer %s again", r.code, r.out, id)
	}
	if strings.Contains(r.errOut, "new") || strings.Contains(r.errOut, "mistake") || !strings.Contains(r.errOut, older) {
		t.Fatalf("customers create retried with its idempotency key: stderr %q; want a note naming %s, "+
			"not calling the customer the first run made new or a mistake", r.errOut, older)
	}
}

// TestCLIRefusesAnEmptyIdempotencyKey: --idempotency-key "" (a script's
// unset variable) is a usage error that sends nothing, on every command
// that takes one: given empty it was sent as no key, so each retry made
// another customer, key or credit. The admin API here is a server that
// counts what reaches it.
func TestCLIRefusesAnEmptyIdempotencyKey(t *testing.T) {
	env, sent := countingAdminAPI(t)
	const id = "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff"
	for _, args := range [][]string{
		{"customers", "create", "--name", "keyless", "--idempotency-key", ""},
		{"keys", "create", "--customer", id, "--name", "ci", "--idempotency-key", " "},
		{"credits", "grant", "--customer", id, "--amount", "5", "--idempotency-key", ""},
		{"credits", "adjust", "--customer", id, "--amount", "-5", "--idempotency-key", ""},
	} {
		if r := runTollgate(t, env, args...); r.code != exitUsage || !strings.Contains(r.errOut, "idempotency-key") {
			t.Errorf("tollgate %q: exit %d, stderr %q; want %d naming --idempotency-key", args, r.code, r.errOut, exitUsage)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests reached the admin API; want none: a blank key's command must send nothing", n)
	}
	// The same commands with a key are sent: the server above is reached.
	runTollgate(t, env, "customers", "create", "--name", "keyed", "--idempotency-key", "k")
	if sent.Load() == 0 {
		t.Error("a create with a key did not reach the admin API: the test's server is not the one the CLI uses")
	}
}

// countingAdminAPI is an admin API that answers every request 418 and
// counts them, and the environment that points the CLI at it: a command
// refused before it sends leaves the count at 0.
func countingAdminAPI(t *testing.T) (map[string]string, *atomic.Int64) {
	t.Helper()
	sent := new(atomic.Int64)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		http.Error(w, "not expected", http.StatusTeapot)
	}))
	t.Cleanup(api.Close)
	return map[string]string{"TOLLGATE_ADMIN_URL": api.URL, "TOLLGATE_ADMIN_TOKEN": "t"}, sent
}
