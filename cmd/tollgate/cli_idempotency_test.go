package main

import (
	"strings"
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
