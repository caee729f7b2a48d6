package main

import (
	"strings"
	"testing"
)

// TestCLIFlagErrorsNameTheFlagAsTyped: a flag error names the flag with
// the two dashes every help text and doc uses. Go's flag package wrote one
// ("invalid value "abc" for flag -amount"), so the operator read of a flag
// that the help never shows.
func TestCLIFlagErrorsNameTheFlagAsTyped(t *testing.T) {
	env := map[string]string{"TOLLGATE_ADMIN_URL": "http://127.0.0.1:9", "TOLLGATE_ADMIN_TOKEN": "t"}
	const id = "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"credits", "grant", "--customer", id, "--amount", "abc"}, "flag --amount"},
		{[]string{"keys", "update", id, "--bogus"}, "not defined: --bogus"},
		{[]string{"customers", "create", "--name"}, "needs an argument: --name"},
	} {
		r := runTollgate(t, env, c.args...)
		if r.code != exitUsage || !strings.Contains(r.errOut, c.want) {
			t.Errorf("tollgate %q: exit %d, stderr %q; want %d saying %q", c.args, r.code, r.errOut, exitUsage, c.want)
		}
	}
}
