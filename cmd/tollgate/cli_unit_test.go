package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCLIHelp: tollgate --help lists every command, the environment and the
// exit codes; every command's --help has its flags and an example; none
// needs a server.
func TestCLIHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		r := runTollgate(t, nil, args...)
		if r.code != exitOK || !strings.Contains(r.out, "tollgate serve") || !strings.Contains(r.out, "TOLLGATE_ADMIN_URL") ||
			!strings.Contains(r.out, "8  reconcile only") {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.out)
		}
		for _, cmd := range commands() {
			if !strings.Contains(r.out, "tollgate "+cmd.name+" ") || !strings.Contains(r.out, cmd.example) {
				t.Errorf("%v does not show %q with its example", args, cmd.name)
			}
		}
	}
	for _, cmd := range commands() {
		r := runTollgate(t, map[string]string{"TOLLGATE_ADMIN_TOKEN": "secret-token"}, append(strings.Fields(cmd.name), "--help")...)
		if r.code != exitOK || !strings.Contains(r.out, "Example:\n  tollgate "+cmd.name) || !strings.Contains(r.out, "--json") ||
			strings.Contains(r.out, "secret-token") {
			t.Errorf("tollgate %s --help: exit %d\n%s", cmd.name, r.code, r.out)
		}
	}
	if r := runTollgate(t, nil, "help", "keys"); r.code != exitOK || !strings.Contains(r.out, "tollgate keys revoke KEY_ID") {
		t.Fatalf("help keys: exit %d\n%s", r.code, r.out)
	}
	if r := runTollgate(t, nil, "keys"); r.code != exitUsage || !strings.Contains(r.errOut, "tollgate keys create") {
		t.Fatalf("keys without a verb: exit %d\n%s", r.code, r.errOut)
	}
}

// TestCLIParseInterspersed: flags before, between and after arguments;
// everything after "--" is an argument.
func TestCLIParseInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	memo := fs.String("memo", "", "")
	j := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, []string{"--json", "a", "--memo", "-5", "b", "--", "--memo", "c"})
	if err != nil || !slices.Equal(pos, []string{"a", "b", "--memo", "c"}) || *memo != "-5" || !*j {
		t.Fatalf("pos %q, memo %q, json %v, err %v", pos, *memo, *j, err)
	}
}

// TestCLIExportInterrupted: a stream cut short exits 1 and leaves no file.
// The server stands in for the export route, to cut the stream.
func TestCLIExportInterrupted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		w.Write([]byte("record,time\nevent,2026-01-01T00:00:00Z\n"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "out.csv")
	args := []string{"export", "--from", "2026-01-01", "--to", "2026-02-01", "--output", file, "--admin-url", srv.URL}
	checkFail(t, runTollgate(t, nil, args...), exitError, "the download stopped after", args)
	if entries, _ := os.ReadDir(filepath.Dir(file)); len(entries) != 0 {
		t.Fatalf("files left: %v", entries)
	}
}

// TestCLIReconcileUnclean: reconcile prints what it found and exits 8 when
// the ledger is not clean. The server stands in for the reconciliation
// route: the real ledger cannot be made inconsistent through its API. The
// tables show the figures that differ, counts as well as charges (a rollup
// row whose request count differs, with the same charge, used to show only
// the two equal charges), and the event counts that do not add up; with
// --json, stderr points to the JSON, not to differences "above".
func TestCLIReconcileUnclean(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/admin/v1/reconciliation" || r.URL.Query().Get("from") == "" || r.URL.Query().Get("to") == "" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"clean":false,"events":3,"attempts":1,"event_ids":5,"ids_without_event":1,` +
			`"rollup_mismatch_count":2,"rollup_mismatches":[{"customer_id":"c2","hour":"2026-01-01T10:00:00Z","key_id":"k2",` +
			`"model":"sim-pro","currency":"USD","fields":["requests","completion_tokens","list_cost"],` +
			`"events":{"requests":3,"completion_tokens":40,"list_cost":"0.6","charge":"0.5"},` +
			`"rollup":{"requests":2,"completion_tokens":17,"list_cost":"0.5","charge":"0.5"}}],` +
			`"balance_mismatches":[{"customer_id":"c1","currency":"USD",` +
			`"expected":{"credits":"1","charges":"0.5"},"stored":{"credits":"1","charges":"0.4"}}]}`))
	}))
	defer srv.Close()
	for _, json := range []bool{false, true} {
		args := []string{"reconcile", "--admin-url", srv.URL}
		if json {
			args = append(args, "--json")
		}
		r := runTollgate(t, nil, args...)
		if r.code != exitUnclean || !strings.Contains(r.out, "c1") || !strings.Contains(r.errOut, "does not reconcile") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.out, r.errOut)
		}
		if json {
			if strings.Contains(r.errOut, "above") || !strings.Contains(r.errOut, "JSON") {
				t.Errorf("%v: stderr %q; want it to point to the JSON", args, r.errOut)
			}
			continue
		}
		if !strings.Contains(r.errOut, "see the differences above") || field(t, r.out, "Attempts (not charged)") != "1" {
			t.Errorf("%v: stderr %q, stdout:\n%s", args, r.errOut, r.out)
		}
		for _, want := range []string{"events (3) + attempts (1) = 4, but there are 5 event ids", "event ids without an event: 1",
			"(the first 1 of 2)"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("%v: no %q in:\n%s", args, want, r.out)
			}
		}
		_, table, _ := strings.Cut(r.out, "a line per figure that differs:\n")
		rows := tableRows(t, table, "HOUR")
		if len(rows) < 3 || !slices.Equal(rows[0][4:], []string{"USD", "requests", "3", "2"}) ||
			!slices.Equal(rows[1][4:], []string{"USD", "completion_tokens", "40", "17"}) ||
			!slices.Equal(rows[2][4:], []string{"USD", "list_cost", "0.6", "0.5"}) {
			t.Errorf("%v: rollup rows %q; want each differing figure with both values", args, rows)
		}
	}
}

// TestServerCommandsHelp: serve, gateway, meter, admin, migrate and demo
// take --help and -h as the admin commands do: their usage (what they do,
// their flags, the environment) on stdout, exit 0, without touching the
// database or a server; they used to print "flag: help requested" and
// exit 1. `tollgate help serve` shows the same. A bad flag or a stray
// argument is a usage error: one line pointing to --help, exit 2.
func TestServerCommandsHelp(t *testing.T) {
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	t.Setenv("TOLLGATE_ADMIN_URL", "http://127.0.0.1:1")
	flags := map[string][]string{"serve": {"--config"}, "gateway": {"--config"}, "meter": {"--config"}, "admin": {"--config"},
		"migrate": {"--down-to"}, "demo": {"--admin-url", "--gateway-url", "--model", "--customer"}}
	if len(flags) != len(serverCommands) {
		t.Fatalf("the test knows %d server commands, there are %d", len(flags), len(serverCommands))
	}
	for name, want := range flags {
		for _, help := range []string{"--help", "-h"} {
			var out, stderr bytes.Buffer
			err := runServer(t.Context(), slog.New(slog.DiscardHandler), name, []string{help}, &out)
			if code := serverExit(name, err, &stderr); code != exitOK || stderr.Len() != 0 ||
				!strings.HasPrefix(out.String(), "Usage: tollgate "+name+" ") || !strings.Contains(out.String(), "TOLLGATE_DATABASE_URL") {
				t.Fatalf("tollgate %s %s: exit %d, stderr %q, stdout:\n%s", name, help, code, stderr.String(), out.String())
			}
			for _, f := range want {
				if !strings.Contains(out.String(), "\n  "+f) {
					t.Errorf("tollgate %s %s does not show %s:\n%s", name, help, f, out.String())
				}
			}
			// demo's --gateway-url showed "(default: TOLLGATE_LISTEN's) (default "http://…")".
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("tollgate %s %s gives two defaults: %q", name, help, line)
				}
			}
		}
		// The top-level help showed meter and admin without [--config FILE].
		if sc := serverCommands[name]; strings.Contains(sc.args, "--config") &&
			!regexp.MustCompile(`\n  tollgate `+name+` +`+regexp.QuoteMeta(sc.args)+` `).MatchString(fullUsage()) {
			t.Errorf("tollgate --help does not show tollgate %s %s:\n%s", name, sc.args, serverUsage)
		}
		if r := runTollgate(t, nil, "help", name); r.code != exitOK || !strings.HasPrefix(r.out, "Usage: tollgate "+name+" ") {
			t.Errorf("tollgate help %s: exit %d, stderr %q, stdout:\n%s", name, r.code, r.errOut, r.out)
		}
		for _, bad := range [][]string{{"--bogus"}, {"stray"}} {
			var out, stderr bytes.Buffer
			err := runServer(t.Context(), slog.New(slog.DiscardHandler), name, bad, &out)
			if code := serverExit(name, err, &stderr); code != exitUsage || out.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 ||
				!strings.Contains(stderr.String(), "run 'tollgate "+name+" --help'") {
				t.Errorf("tollgate %s %s: exit %d, stdout %q, stderr %q; want exit 2 and one line", name, bad[0], code, out.String(), stderr.String())
			}
		}
	}
	// Every command's Environment section said TOLLGATE_DATA_DIR held the
	// spool and the embedded JetStream, leaving out the crash journal.
	if !strings.Contains(envUsage, "TOLLGATE_DATA_DIR       local data: the usage spool, the crash journal and the embedded JetStream") {
		t.Errorf("the Environment section's TOLLGATE_DATA_DIR does not name the crash journal:\n%s", envUsage)
	}
	var stderr bytes.Buffer
	err := runServer(t.Context(), slog.New(slog.DiscardHandler), "gateway", nil, io.Discard)
	if code := serverExit("gateway", err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--config FILE is required") {
		t.Errorf("tollgate gateway without --config: exit %d, stderr %q", code, stderr.String())
	}
}

// TestHelpWhateverTheLogLevel: a bad TOLLGATE_LOG_LEVEL stops every
// command (exit 2), but help is shown whatever the environment holds, as
// `tollgate --help` promises (exit 0): asksHelp tells main so.
func TestHelpWhateverTheLogLevel(t *testing.T) {
	for args, want := range map[string]bool{
		"--help": true, "help serve": true, "serve --help": true, "keys create -h": true, "usage -help": true,
		"serve --config x.yaml": false, "keys list": false, "": false, "keys create -- --help": false,
	} {
		if got := asksHelp(strings.Fields(args)); got != want {
			t.Errorf("asksHelp(%q) = %v, want %v", args, got, want)
		}
	}
}

// TestRepeatsOncePerMinute: a NATS asynchronous error that nats.go repeats
// every few seconds while NATS is away (an observability review: 9 lines
// in 40 s) is logged at WARN once a minute; another error at once.
func TestRepeatsOncePerMinute(t *testing.T) {
	r := &repeats{every: time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		msg  string
		at   time.Duration
		want bool
	}{
		{"consumer not active", 0, true},
		{"consumer not active", 10 * time.Second, false},
		{"slow consumer", 20 * time.Second, true},
		{"consumer not active", 59 * time.Second, false},
		{"consumer not active", 61 * time.Second, true},
		{"slow consumer", 70 * time.Second, false},
		{"slow consumer", 81 * time.Second, true},
	} {
		if got := r.first(c.msg, t0.Add(c.at)); got != c.want {
			t.Fatalf("step %d: first(%q, +%v) = %v, want %v", i, c.msg, c.at, got, c.want)
		}
	}
	if len(r.last) > 2 {
		t.Fatalf("repeats keeps %d messages", len(r.last))
	}
}

// TestCloseBeginsTheGatewaysStopFirst: the gateway's stop begins as close
// begins, beside the admin listener's wait for its exports, and what was
// started before the gateway stops after it has. The gateway took new
// requests for the whole of the admin listener's wait (a crash review).
func TestCloseBeginsTheGatewaysStopFirst(t *testing.T) {
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	gatewayBegan := make(chan struct{})
	a := &app{grace: time.Second}
	a.started("database", 0, func(context.Context) error { note("database"); return nil })
	a.startedEarly("gateway", 0, func(context.Context) error {
		close(gatewayBegan)
		time.Sleep(50 * time.Millisecond)
		note("gateway")
		return nil
	})
	a.started("admin listener", 0, func(ctx context.Context) error {
		select {
		case <-gatewayBegan:
		case <-ctx.Done():
			return errors.New("the gateway's stop had not begun while the admin listener waited")
		}
		note("admin listener")
		return nil
	})
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "admin listener,gateway,database" {
		t.Fatalf("stopped %s; want admin listener,gateway,database", got)
	}
}

// TestCLIUsageByDeploymentShowsAttemptsNotCharged: grouped by deployment
// (or provider) the admin API counts the failed attempts retried elsewhere
// in not_charged_requests, which docs/billing.md has an operator use to
// reconcile a provider's invoice. The table left the column out: a
// deployment whose every attempt failed showed as "1 request, cost 0",
// indistinguishable from an unpriced one (a new operator's review).
func TestCLIUsageByDeploymentShowsAttemptsNotCharged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/admin/v1/usage" {
			http.NotFound(w, r)
			return
		}
		g := r.URL.Query().Get("group_by")
		w.Write([]byte(`{"data":[{"group":"east/sim-pro","` + g + `":"east/sim-pro","requests":1,"not_charged_requests":1,` +
			`"unpriced_requests":0,"prompt_tokens":0,"cached_tokens":0,"cache_write_tokens":0,"completion_tokens":0,` +
			`"reasoning_tokens":0,"web_search_requests":0,"cost":"0","currency":""},` +
			`{"group":"west","` + g + `":"west","requests":6,"unpriced_requests":0,"prompt_tokens":48,"cached_tokens":24,` +
			`"cache_write_tokens":0,"completion_tokens":30,"reasoning_tokens":12,"web_search_requests":0,"cost":"0.00039","currency":"USD"}]}`))
	}))
	defer srv.Close()
	for _, g := range []string{"deployment", "provider"} {
		r := runTollgate(t, nil, "usage", "--admin-url", srv.URL, "--group-by", g)
		if r.code != exitOK || !strings.Contains(r.out, "NOT CHARGED") {
			t.Fatalf("usage --group-by %s: exit %d, stdout %q, stderr %q", g, r.code, r.out, r.errOut)
		}
		rows := tableRows(t, r.out, strings.ToUpper(g))
		if len(rows) != 2 || rows[0][1] != "1" || rows[0][2] != "1" || rows[1][1] != "6" || rows[1][2] != "0" {
			t.Errorf("usage --group-by %s: rows %q; want REQUESTS then NOT CHARGED", g, rows)
		}
	}
	r := runTollgate(t, nil, "usage", "--admin-url", srv.URL, "--group-by", "model")
	if r.code != exitOK || strings.Contains(r.out, "NOT CHARGED") {
		t.Errorf("usage --group-by model: exit %d, stdout %q; the column is the deployment's and provider's", r.code, r.out)
	}
}

// TestFlagsUsageShowsNumbersAsNumbers: a command's --help shows a number
// flag's default as a number and a string's quoted, as Go's flag package
// does ("--limit int ... (default "100")" read as a string to quote), and
// the counts of keys create and update as N, as their synopsis does, not
// as "string".
func TestFlagsUsageShowsNumbersAsNumbers(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("limit", 100, "at most this many")
	fs.String("format", "json", "json or csv")
	got := flagsUsage(fs)
	for _, want := range []string{"--limit int\n      at most this many (default 100)\n", "--format string\n      json or csv (default \"json\")\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("flagsUsage:\n%s\nlacks %q", got, want)
		}
	}
	for _, verb := range []string{"create", "update"} {
		r := runTollgate(t, nil, "keys", verb, "--help")
		for _, f := range []string{"rpm-limit", "tpm-limit", "max-concurrent"} {
			if !strings.Contains(r.out, "\n  --"+f+" N\n") {
				t.Errorf("tollgate keys %s --help shows --%s not as N:\n%s", verb, f, r.out)
			}
		}
	}
}

// TestUnreachableSaysHowToPointTheCLI: an admin command that found no
// admin API said only "cannot reach the admin API at
// http://127.0.0.1:8081: connection refused". A new user who moved the
// admin listener (`TOLLGATE_ADMIN_LISTEN=… make run`, as the README offers)
// and then ran the README's CLI commands took the server for down: the
// message must say how to name the address it listens on.
func TestUnreachableSaysHowToPointTheCLI(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	r := runTollgate(t, map[string]string{"TOLLGATE_ADMIN_TOKEN": "t", "TOLLGATE_ADMIN_URL": closed}, "customers", "list")
	if r.code != exitUnreachable || !strings.Contains(r.errOut, "cannot reach the admin API at "+closed) ||
		!strings.Contains(r.errOut, "TOLLGATE_ADMIN_URL") || !strings.Contains(r.errOut, "--admin-url") ||
		!strings.Contains(r.errOut, "TOLLGATE_ADMIN_LISTEN") || strings.Count(r.errOut, "\n") != 1 {
		t.Errorf("customers list with no admin API at %s: exit %d, stderr %q; want exit %d, one line naming --admin-url, TOLLGATE_ADMIN_URL and TOLLGATE_ADMIN_LISTEN",
			closed, r.code, r.errOut, exitUnreachable)
	}
}

// TestNoTokenSaysTheTokenIsNotSet: an admin command run in a shell where
// TOLLGATE_ADMIN_TOKEN is not exported (the README's walkthrough in a new
// terminal) said "missing or wrong admin token", which sends the user
// checking a token they never set. With no token at all, it says so.
func TestNoTokenSaysTheTokenIsNotSet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"code":"unauthorized","type":"unauthorized","message":"missing or wrong admin token (Authorization: Bearer $TOLLGATE_ADMIN_TOKEN)"}}`))
	}))
	defer srv.Close()
	r := runTollgate(t, map[string]string{"TOLLGATE_ADMIN_URL": srv.URL}, "customers", "list")
	if r.code != exitUnauthorized || !strings.Contains(r.errOut, "TOLLGATE_ADMIN_TOKEN is not set") || strings.Count(r.errOut, "\n") != 1 {
		t.Errorf("customers list without a token: exit %d, stderr %q; want exit %d, one line saying TOLLGATE_ADMIN_TOKEN is not set", r.code, r.errOut, exitUnauthorized)
	}
	r = runTollgate(t, map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": "wrong"}, "customers", "list")
	if r.code != exitUnauthorized || strings.Contains(r.errOut, "is not set") {
		t.Errorf("customers list with a wrong token: exit %d, stderr %q; want exit %d, not saying the token is not set", r.code, r.errOut, exitUnauthorized)
	}
}

// TestDeadLettersInWords: dlq replay and remove say "0 dead letters" for
// none (a replay of an empty dead-letter stream), "1 dead letter" for one.
func TestDeadLettersInWords(t *testing.T) {
	for n, want := range map[int]string{0: "0 dead letters", 1: "1 dead letter", 2: "2 dead letters"} {
		if got := deadLetters(n); got != want {
			t.Errorf("deadLetters(%d) = %q, want %q", n, got, want)
		}
	}
}
