package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// cliResult is one in-process run of the admin CLI.
type cliResult struct {
	code        int
	out, errOut string
}

// runTollgate runs the admin CLI in-process with env as its environment.
func runTollgate(t testing.TB, env map[string]string, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runCLI(context.Background(), args, &out, &errOut, func(k string) string { return env[k] })
	return cliResult{code: code, out: out.String(), errOut: errOut.String()}
}

// tg runs the CLI against the stack's admin API with the admin token.
func (s *stack) tg(args ...string) cliResult {
	s.t.Helper()
	return runTollgate(s.t, map[string]string{"TOLLGATE_ADMIN_URL": s.admin, "TOLLGATE_ADMIN_TOKEN": testAdminToken}, args...)
}

// tgOK is tg for a run that must succeed; it returns stdout.
func (s *stack) tgOK(args ...string) string {
	s.t.Helper()
	r := s.tg(args...)
	if r.code != exitOK {
		s.t.Fatalf("tollgate %s: exit %d, stderr %q, stdout %q", strings.Join(args, " "), r.code, r.errOut, r.out)
	}
	return r.out
}

// tgJSON runs a command that must succeed with --json and decodes its
// output into out.
func (s *stack) tgJSON(out any, args ...string) {
	s.t.Helper()
	b := s.tgOK(append(args, "--json")...)
	if err := json.Unmarshal([]byte(b), out); err != nil {
		s.t.Fatalf("tollgate %s --json: %v: %s", strings.Join(args, " "), err, b)
	}
}

// tgFail runs a command that must exit with code, with one line on stderr
// containing wantErr; it returns stderr.
func (s *stack) tgFail(code int, wantErr string, args ...string) string {
	s.t.Helper()
	return checkFail(s.t, s.tg(args...), code, wantErr, args)
}

func checkFail(t testing.TB, r cliResult, code int, wantErr string, args []string) string {
	t.Helper()
	if r.code != code || !strings.Contains(r.errOut, wantErr) || strings.Count(r.errOut, "\n") != 1 {
		t.Fatalf("tollgate %s: exit %d, stderr %q; want exit %d and one line with %q",
			strings.Join(args, " "), r.code, r.errOut, code, wantErr)
	}
	return r.errOut
}

// field returns the value of "Name:" in a fields view, or fails.
func field(t *testing.T, out, name string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %q in:\n%s", name, out)
	return ""
}

// tableRows returns a table's rows (without the header), as fields.
func tableRows(t *testing.T, out string, header string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], header) {
		t.Fatalf("table does not start with %q:\n%s", header, out)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}
