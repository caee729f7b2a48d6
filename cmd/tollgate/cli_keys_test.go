package main

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestCLIKeyLimits: keys create and keys update set every limit; --no-X
// removes one; contradictory or empty updates are usage errors; the
// gateway applies a change as soon as the command returns.
func TestCLIKeyLimits(t *testing.T) {
	s := newStack(t, nil)
	r := s.tg("keys", "create", "--customer", s.customerID, "--name", "limited", "--daily-limit", "5", "--monthly-limit", "50",
		"--rpm-limit", "600", "--tpm-limit", "100000", "--max-concurrent", "4", "--expires-at", "2030-01-01",
		"--allowed-models", "gpt-4o, anthropic/*")
	if r.code != exitOK {
		t.Fatalf("keys create: exit %d: %s", r.code, r.errOut)
	}
	keyID, secret := field(t, r.out, "ID"), field(t, r.out, "Secret")
	if got := field(t, r.out, "Rate limits"); got != "600 rpm, 100000 tpm, 4 open" {
		t.Fatalf("rate limits %q:\n%s", got, r.out)
	}
	if got := field(t, r.out, "Allowed models"); got != "gpt-4o, anthropic/*" {
		t.Fatalf("allowed models %q", got)
	}
	if got := field(t, r.out, "Expires"); got != "2030-01-01T00:00:00Z" {
		t.Fatalf("expires %q", got)
	}
	// sim-pro is not allowed: 403 at once, without waiting for a refresh.
	if code, _ := s.chatAs(secret); code != http.StatusForbidden {
		t.Fatalf("a model outside allowed_models: %d, want 403", code)
	}
	var k ledger.Key
	s.tgJSON(&k, "keys", "update", keyID, "--all-models", "--no-rpm-limit", "--tpm-limit", "5000", "--no-expires-at", "--name", "renamed")
	if k.Name != "renamed" || k.RPMLimit != nil || k.TPMLimit == nil || *k.TPMLimit != 5000 || k.ExpiresAt != nil ||
		len(k.AllowedModels) != 0 || k.DailyLimit == nil {
		t.Fatalf("keys update: %+v", k)
	}
	s.refreshKeys()
	if code, body := s.chatAs(secret); code != http.StatusOK {
		t.Fatalf("every model allowed again: %d %s", code, body)
	}
	if got := field(t, s.tgOK("keys", "get", keyID), "Rate limits"); got != "5000 tpm, 4 open" {
		t.Fatalf("keys get: rate limits %q", got)
	}
	for _, args := range [][]string{
		{"keys", "update", keyID},
		{"keys", "update", keyID, "--rpm-limit", "5", "--no-rpm-limit"},
		{"keys", "update", keyID, "--rpm-limit", "0"},
		{"keys", "update", keyID, "--allowed-models", "a", "--all-models"},
		{"keys", "update", keyID, "--expires-at", "soon"},
		{"keys", "create", "--customer", s.customerID, "--name", "n", "--max-concurrent", "-1"},
	} {
		if r := s.tg(args...); r.code != exitUsage {
			t.Errorf("%q: exit %d, want %d (usage): %s", args, r.code, exitUsage, r.errOut)
		}
	}
	// A key needs a name, as the API's KeyCreate does.
	s.tgFail(exitUsage, "--name is required", "keys", "create", "--customer", s.customerID)
	s.tgFail(exitUsage, "--name is required", "keys", "create", "--customer", s.customerID, "--name", " ")
	// Amounts are checked as the API checks them, before anything is sent
	// (a new operator's review: they were sent, and refused with exit 5).
	s.tgFail(exitUsage, `daily-limit: "-3" is negative`, "keys", "update", keyID, "--daily-limit", "-3")
	s.tgFail(exitUsage, `monthly-limit: "abc" is not a decimal number`, "keys", "update", keyID, "--monthly-limit", "abc")
	s.tgFail(exitUsage, `credit-limit: "1,000" is not a decimal number`, "customers", "update", s.customerID, "--credit-limit", "1,000")
	s.tgFail(exitUsage, `input: "1e3" is in exponent notation`, "prices", "create", "--model", "m", "--currency", "USD",
		"--input", "1e3", "--output", "1", "--effective-from", "2026-01-01")
}

// TestCLIKeysUpdateEmptyName: keys update --name given empty is a usage
// error, before anything is sent, as customers update's: beside a limit
// it was dropped and the command exited 0 without the rename.
func TestCLIKeysUpdateEmptyName(t *testing.T) {
	for _, args := range [][]string{
		{"keys", "update", "0197a3c4-aaaa-7bbb-8ccc-ddddeeeeffff", "--name", ""},
		{"keys", "update", "0197a3c4-aaaa-7bbb-8ccc-ddddeeeeffff", "--name", "", "--daily-limit", "7"},
	} {
		args = append(args, "--admin-url", "http://127.0.0.1:1")
		checkFail(t, runTollgate(t, nil, args...), exitUsage, "--name is empty", args)
	}
}
