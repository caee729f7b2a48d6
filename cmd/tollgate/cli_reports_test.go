package main

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestCLIReports: statements get (table, --json, CSV to a file), export
// (CSV to a file with progress, and to stdout) and reconcile, against the
// real admin API.
func TestCLIReports(t *testing.T) {
	s := newStack(t, nil)
	now := time.Now().UTC()
	period := now.Format("2006-01")
	from, to := now.Add(-24*time.Hour).Format(time.DateOnly), now.Add(48*time.Hour).Format(time.DateOnly)
	dir := t.TempDir()

	_, reqID := s.chatAs(s.secret)
	s.event(reqID)
	s.tgOK("credits", "grant", "--customer", s.customerID, "--amount", "1", "--memo", "a memo\nover two lines, \"quoted\"")

	out := s.tgOK("statements", "get", "--customer", s.customerID, "--period", period)
	if !strings.Contains(out, "USD charges") || !strings.Contains(out, "sim-pro") ||
		field(t, out, "Exact total") != "0.0002625" || field(t, out, "Total") != "0.00 USD" {
		t.Fatalf("statements get:\n%s", out)
	}
	var st ledger.Statement
	s.tgJSON(&st, "statements", "get", "--customer", s.customerID, "--period", period)
	if st.Period != period || len(st.Sections) != 1 || st.Sections[0].ClosingBalance != "0.9997375" {
		t.Fatalf("statements get --json: %+v", st)
	}
	stFile := filepath.Join(dir, "statement.csv")
	r := s.tg("statements", "get", "--customer", s.customerID, "--period", period, "--format", "csv", "--output", stFile)
	if b, err := os.ReadFile(stFile); r.code != exitOK || err != nil || !strings.Contains(string(b), "sim-pro") {
		t.Fatalf("statements get --format csv: exit %d %s, file %q %v", r.code, r.errOut, b, err)
	}
	s.tgFail(exitUsage, "--period", "statements", "get", "--customer", s.customerID, "--period", "January")
	s.tgFail(exitNotFound, "not found", "statements", "get", "--customer", "00000000-0000-7000-8000-000000000000", "--period", period)

	file := filepath.Join(dir, "ledger.csv")
	r = s.tg("export", "--from", from, "--to", to, "--output", file, "--progress")
	if r.code != exitOK || !strings.Contains(r.errOut, "2 rows") || !strings.Contains(r.errOut, "/s)") ||
		!strings.Contains(r.errOut, "Wrote 2 rows") {
		t.Fatalf("export --progress: exit %d, stderr %q", r.code, r.errOut)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil || len(records) != 3 || records[0][0] != "record" {
		t.Fatalf("export file: %q %v", records, err)
	}
	// To stdout, without --progress and with stderr not a terminal: no progress.
	r = s.tg("export", "--from", from, "--to", to)
	if b, _ := os.ReadFile(file); r.code != exitOK || r.out != string(b) || r.errOut != "" {
		t.Fatalf("export to stdout: exit %d, stderr %q, %d bytes", r.code, r.errOut, len(r.out))
	}
	s.tgFail(exitUsage, "--to is required", "export", "--from", from)
	// --json is refused where the answer is CSV, rather than ignored.
	s.tgFail(exitUsage, "export writes CSV", "export", "--from", from, "--to", to, "--json")
	s.tgFail(exitUsage, "--format csv", "statements", "get", "--customer", s.customerID, "--period", period, "--format", "csv", "--json")

	out = s.tgOK("reconcile", "--from", from, "--to", to)
	if field(t, out, "Clean") != "yes" || field(t, out, "Events") != "1" || field(t, out, "Attempts (not charged)") != "0" ||
		strings.Contains(out, "do not add up") || strings.Contains(out, "differ") {
		t.Fatalf("reconcile:\n%s", out)
	}
	var rec ledger.Reconciliation
	s.tgJSON(&rec, "reconcile")
	if !rec.Clean || rec.Events != 1 {
		t.Fatalf("reconcile --json (last 24 hours): %+v", rec)
	}
	s.tgFail(exitInvalid, "", "reconcile", "--from", to, "--to", from)
}

// TestCLIDownloadToAMissingDirectory: --output in a directory that does
// not exist names that file and why, not the temporary file the download
// would have been written to first (".jan.csv.3251767843.partial"), a
// name the operator never gave; nothing is sent.
func TestCLIDownloadToAMissingDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "missing", "jan.csv")
	for _, args := range [][]string{
		{"export", "--from", "2026-01-01", "--to", "2026-02-01", "--output", file},
		{"statements", "get", "--customer", "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", "--period", "2026-01", "--format", "csv", "--output", file},
	} {
		args = append(args, "--admin-url", "http://127.0.0.1:1")
		errOut := checkFail(t, runTollgate(t, nil, args...), exitError, "create "+file+": no such file or directory", args)
		if strings.Contains(errOut, ".partial") {
			t.Fatalf("tollgate %s: stderr %q names the temporary file", strings.Join(args, " "), errOut)
		}
	}
}

// TestCLIStatementJSONToAFileSaysItsSize: statements get --output FILE
// (JSON, the default format) says how much it wrote, not "0 rows": a
// statement in JSON is one document, and finance read "Wrote 0 rows" as
// an empty statement. The server stands in for the statement route.
func TestCLIStatementJSONToAFileSaysItsSize(t *testing.T) {
	body := `{"customer_id":"0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff","period":"2026-01","sections":[{"currency":"USD","lines":[{"kind":"usage","amount":"1.5"}]}]}` + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "jan.json")
	r := runTollgate(t, nil, "statements", "get", "--customer", "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", "--period", "2026-01",
		"--output", file, "--admin-url", srv.URL)
	if b, _ := os.ReadFile(file); r.code != exitOK || string(b) != body {
		t.Fatalf("exit %d, stderr %q, file %q", r.code, r.errOut, b)
	}
	if want := fmt.Sprintf("Wrote %d B to %s.\n", len(body), file); r.errOut != want {
		t.Fatalf("stderr %q, want %q", r.errOut, want)
	}
}
