package main

import (
	"strings"
	"testing"
)

// TestCLIRefusesAnEmptyAllowedModels: --allowed-models that names no
// model ("", " , ": a script's unset variable) is a usage error that sends
// nothing. On keys create it made a key for every model; on keys update it
// said "nothing to change", or, beside another flag, sent a list of no
// models, which the ledger takes for every model: meant to restrict a key,
// it opened it. The admin API here is a server that counts what reaches
// it.
func TestCLIRefusesAnEmptyAllowedModels(t *testing.T) {
	env, sent := countingAdminAPI(t)
	const id = "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff"
	for _, args := range [][]string{
		{"keys", "create", "--customer", id, "--name", "ci", "--allowed-models", ""},
		{"keys", "create", "--customer", id, "--name", "ci", "--allowed-models", " , "},
		{"keys", "update", id, "--allowed-models", ""},
		{"keys", "update", id, "--name", "renamed", "--allowed-models", ","},
	} {
		if r := runTollgate(t, env, args...); r.code != exitUsage || !strings.Contains(r.errOut, "allowed-models") ||
			!strings.Contains(r.errOut, "names no model") {
			t.Errorf("tollgate %q: exit %d, stderr %q; want %d saying --allowed-models names no model", args, r.code, r.errOut, exitUsage)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests reached the admin API; want none", n)
	}
	runTollgate(t, env, "keys", "update", id, "--allowed-models", "gpt-4o,openai/*")
	if sent.Load() == 0 {
		t.Error("an update with models did not reach the admin API: the test's server is not the one the CLI uses")
	}
}
