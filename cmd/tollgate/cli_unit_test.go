package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/migrations"
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

// TestMigrateDownToNegativeIsRefused: `tollgate migrate --down-to N`
// rolls back (docs/operations.md, "Upgrades" step 4; `tollgate --help`:
// "migrate [--down-to N] ... (or roll back to N)"). The flag's default, -1,
// doubled as "not given", so an operator's `--down-to -1` (a typo, or a
// script's unset variable arithmetic) was silently taken as a plain
// `tollgate migrate` and applied every pending migration: the opposite of
// what was asked, logged as "migrations applied". It must be refused as bad
// usage (exit 2) before the database is touched. Here the database is
// unreachable, so code that opens it first fails on the connection
// instead, not on the flag.
func TestMigrateDownToNegativeIsRefused(t *testing.T) {
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range []string{"-1", "-5", "two"} {
		err := migrate(ctx, slog.New(slog.DiscardHandler), []string{"--down-to", v}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "down-to") {
			t.Fatalf("migrate --down-to %s = %v; want a usage error naming --down-to, before any database access", v, err)
		}
		var stderr bytes.Buffer
		if code := serverExit("migrate", err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "run 'tollgate migrate --help'") {
			t.Fatalf("migrate --down-to %s: exit %d, stderr %q; want exit 2 and a pointer to --help", v, code, stderr.String())
		}
	}
}

// TestMigrateDownToSaysWhoHoldsTheLock: `tollgate migrate --down-to N`, an
// upgrade's undo (docs/operations.md, "Upgrades" step 4), takes the same
// migration lock as `tollgate migrate` and `serve`, and waits up to 10
// minutes for it. The docs promise that a migrator waiting for it logs every
// 15 s which session holds it; `tollgate migrate` did, but the rollback
// waited in silence, so an operator behind a killed migrator's session saw
// nothing for minutes. It must name the holder as the upgrade does.
func TestMigrateDownToSaysWhoHoldsTheLock(t *testing.T) {
	url := ledgertest.NewDatabase(t)
	t.Setenv("TOLLGATE_DATABASE_URL", url)
	if err := migrate(t.Context(), slog.New(slog.DiscardHandler), nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	ledgertest.HoldMigrationLock(t, url, "stuck-migrator")
	defer func(d time.Duration) { migrateReportEvery = d }(migrateReportEvery)
	migrateReportEvery = 50 * time.Millisecond
	logs := &syncBuffer{}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- migrate(ctx, slog.New(slog.NewJSONHandler(logs, nil)), []string{"--down-to", "0"}, io.Discard)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "the migration lock is held") || !strings.Contains(logs.String(), "stuck-migrator") {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("30 s into the rollback's wait for the migration lock, the log says nothing of its holder:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err == nil {
		t.Fatal("migrate --down-to 0 stopped while waiting for the lock and reported success")
	}
}

// TestMigrateDownToNotBelowRollsNothingBack: `tollgate migrate --down-to N`
// with N not below the database's version does nothing (as goose's DownTo:
// no error, so that an undo run twice is not a failure), and says so in a
// warning naming both versions, where it used to log "migrations rolled
// back to_version N". Below it, it rolls back and says how many.
func TestMigrateDownToNotBelowRollsNothingBack(t *testing.T) {
	url := ledgertest.NewDatabase(t)
	t.Setenv("TOLLGATE_DATABASE_URL", url)
	ctx := t.Context()
	run := func(args ...string) string {
		t.Helper()
		var logs bytes.Buffer
		if err := migrate(ctx, slog.New(slog.NewJSONHandler(&logs, nil)), args, io.Discard); err != nil {
			t.Fatalf("migrate %v: %v", args, err)
		}
		return logs.String()
	}
	run()
	s, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	latest := len(files)
	for _, to := range []string{"99", strconv.Itoa(latest)} {
		logs := run("--down-to", to)
		if strings.Contains(logs, "migrations rolled back") || !strings.Contains(logs, `"level":"WARN","msg":"nothing rolled back`) ||
			!strings.Contains(logs, fmt.Sprintf(`"version":%d,"to_version":%s`, latest, to)) {
			t.Fatalf("migrate --down-to %s at version %d logged:\n%s\nwant a warning that nothing was rolled back", to, latest, logs)
		}
		if err := s.CheckMigrated(ctx); err != nil {
			t.Fatalf("after migrate --down-to %s: %v", to, err)
		}
	}
	to := latest - 2
	want := fmt.Sprintf(`"msg":"migrations rolled back","count":2,"from_version":%d,"to_version":%d`, latest, to)
	if logs := run("--down-to", strconv.Itoa(to)); !strings.Contains(logs, want) {
		t.Fatalf("migrate --down-to %d at version %d logged:\n%s", to, latest, logs)
	}
	if err := s.CheckMigrated(ctx); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at migration %d", to)) {
		t.Fatalf("after migrate --down-to %d: %v", to, err)
	}

	// A rollback of a database that is not there fails and creates
	// nothing; it used to create an empty database and warn that nothing
	// was rolled back.
	missing := url + "_missing"
	if i := strings.Index(url, "?"); i >= 0 {
		missing = url[:i] + "_missing" + url[i:]
	}
	t.Setenv("TOLLGATE_DATABASE_URL", missing)
	t.Cleanup(func() { // only when this test fails: the database it should not have made
		u, err := neturl.Parse(missing)
		if err != nil {
			return
		}
		name := strings.TrimPrefix(u.Path, "/")
		u.Path = "/postgres"
		if admin, err := pgx.Connect(context.Background(), u.String()); err == nil {
			admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			admin.Close(context.Background())
		}
	})
	err = migrate(ctx, slog.New(slog.DiscardHandler), []string{"--down-to", "0"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("migrate --down-to 0 on a missing database = %v, want an error saying it does not exist", err)
	}
	if s, err := ledger.OpenExisting(ctx, missing); err == nil {
		s.Close()
		t.Fatalf("migrate --down-to 0 created the missing database %s", missing)
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

// TestDemoExitsAsTheAdminCommandsDo: tollgate demo is an admin API client,
// but a wrong admin token (or a refused request) ended it with exit 1,
// where every admin command exits 6 (unauthorized).
func TestDemoExitsAsTheAdminCommandsDo(t *testing.T) {
	srv := refusingAdmin(t, "wrong admin token")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := demo(ctx, nil, io.Discard, func(k string) string {
		return map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": "wrong"}[k]
	})
	var stderr bytes.Buffer
	if code := serverExit("demo", err, &stderr); code != exitUnauthorized || !strings.Contains(stderr.String(), "wrong admin token") {
		t.Fatalf("demo with a wrong token: exit %d, %q; want %d naming the refusal", code, stderr.String(), exitUnauthorized)
	}
}

// refusingAdmin stands in for an admin API that is healthy and refuses
// every request as unauthorized, with msg; it is closed with the test.
func refusingAdmin(t *testing.T, msg string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"code":"unauthorized","type":"unauthorized","message":"` + msg + `"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDemoErrorsSayWhatToDo: tollgate demo without TOLLGATE_ADMIN_TOKEN
// said only "missing or wrong admin token", and with the admin listener
// moved (TOLLGATE_ADMIN_LISTEN, as the README offers) "cannot reach the
// admin API at http://127.0.0.1:8081": the admin commands add, for the
// same errors, that the variable is not set, and where to point them.
// demo says so too.
func TestDemoErrorsSayWhatToDo(t *testing.T) {
	refusing := refusingAdmin(t, "missing or wrong admin token")
	// Healthy, then gone: the customers request finds nothing listening.
	gone := httptest.NewUnstartedServer(nil)
	gone.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		gone.Listener.Close()
	})
	gone.Start()
	defer gone.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		url, token string
		code       int
		want       string
	}{
		{refusing.URL, "", exitUnauthorized, "TOLLGATE_ADMIN_TOKEN is not set"},
		{gone.URL, "t", exitUnreachable, "point --admin-url or TOLLGATE_ADMIN_URL at its TOLLGATE_ADMIN_LISTEN"},
	} {
		err := demo(ctx, nil, io.Discard, func(k string) string {
			return map[string]string{"TOLLGATE_ADMIN_URL": tc.url, "TOLLGATE_ADMIN_TOKEN": tc.token}[k]
		})
		var stderr bytes.Buffer
		if code := serverExit("demo", err, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("demo against %s, token %q: exit %d, %q; want %d saying %q", tc.url, tc.token, code, stderr.String(), tc.code, tc.want)
		}
	}
	// A wrong token that is set is not said to be unset.
	err := demo(ctx, nil, io.Discard, func(k string) string {
		return map[string]string{"TOLLGATE_ADMIN_URL": refusing.URL, "TOLLGATE_ADMIN_TOKEN": "wrong"}[k]
	})
	var stderr bytes.Buffer
	if code := serverExit("demo", err, &stderr); code != exitUnauthorized || strings.Contains(stderr.String(), "not set") {
		t.Errorf("demo with a wrong token: exit %d, %q", code, stderr.String())
	}
}

// TestDemoHonoursAdminURLEnv: `tollgate demo` sends its requests to
// TOLLGATE_ADMIN_URL, as the admin commands do, and --admin-url wins over
// it; it used to go to 127.0.0.1:8081 whatever the environment said. A
// TOLLGATE_ADMIN_URL that is not an http(s) URL is a usage error, as for
// the admin commands. The server stands in for the admin API.
func TestDemoHonoursAdminURLEnv(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		switch {
		case r.URL.Path == "/healthz":
		case r.Method == "GET" && r.URL.Path == "/admin/v1/customers":
			w.Write([]byte(`{"data":[{"id":"c-demo","name":"demo"}]}`))
		case r.Method == "POST" && r.URL.Path == "/admin/v1/customers/c-demo/keys":
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"k1","customer_id":"c-demo","key":"tg-demo-secret"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := demo(ctx, nil, &out, env(map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": "t"})); err != nil {
		t.Fatalf("demo with TOLLGATE_ADMIN_URL=%s: %v (requests %v)", srv.URL, err, paths)
	}
	if !strings.Contains(out.String(), "tg-demo-secret") || !strings.Contains(out.String(), srv.URL+"/admin/v1/usage?customer_id=c-demo") {
		t.Fatalf("demo printed:\n%s", out.String())
	}
	paths = nil
	out.Reset()
	if err := demo(ctx, []string{"--admin-url", srv.URL}, &out, env(map[string]string{"TOLLGATE_ADMIN_URL": "http://127.0.0.1:1"})); err != nil ||
		len(paths) == 0 {
		t.Fatalf("demo --admin-url %s beside another TOLLGATE_ADMIN_URL: %v (requests %v)", srv.URL, err, paths)
	}
	// The LLM API printed is where TOLLGATE_LISTEN puts `tollgate serve`
	// (it printed :8080 whatever the environment said), or --gateway-url.
	for listen, want := range map[string]string{"": "http://127.0.0.1:8080", ":9090": "http://127.0.0.1:9090",
		"0.0.0.0:9091": "http://127.0.0.1:9091", "[::]:9092": "http://[::1]:9092", "gw.internal:80": "http://gw.internal:80"} {
		out.Reset()
		if err := demo(ctx, nil, &out, env(map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_LISTEN": listen})); err != nil ||
			!strings.Contains(out.String(), "curl -N "+want+"/v1/chat/completions") {
			t.Fatalf("demo with TOLLGATE_LISTEN=%q: %v, printed:\n%s\nwant the LLM API at %s", listen, err, out.String(), want)
		}
	}
	out.Reset()
	if err := demo(ctx, []string{"--gateway-url", "https://llm.example"}, &out,
		env(map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_LISTEN": ":9090"})); err != nil ||
		!strings.Contains(out.String(), "curl -N https://llm.example/v1/chat/completions") {
		t.Fatalf("demo --gateway-url beside TOLLGATE_LISTEN: %v, printed:\n%s", err, out.String())
	}
	err := demo(ctx, nil, io.Discard, env(map[string]string{"TOLLGATE_ADMIN_URL": "127.0.0.1:8081"}))
	var stderr bytes.Buffer
	if code := serverExit("demo", err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "not an http(s) URL") {
		t.Fatalf("demo with TOLLGATE_ADMIN_URL=127.0.0.1:8081: exit %d, stderr %q", code, stderr.String())
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

// TestDemoListenURLIsAURL: listenURL joined TOLLGATE_LISTEN's host and
// port into a URL as they were, but a listen address is net.Listen's
// syntax, not a URL's: a service name port (config check accepts
// "127.0.0.1:http" as good, and serve listens on port 80) gave
// "http://127.0.0.1:http", which curl and net/url refuse; an IPv6 zone's
// "%" must be "%25" in a URL.
func TestDemoListenURLIsAURL(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:http":    "http://127.0.0.1:80",
		":https":            "http://127.0.0.1:443",
		"[fe80::1%lo]:9090": "http://[fe80::1%25lo]:9090",
	} {
		got := listenURL(listen)
		_, err := neturl.Parse(got)
		if got != want || err != nil {
			t.Errorf("listenURL(%q) = %q (url.Parse: %v), want %q", listen, got, err, want)
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

// TestMigrateSaysHowManyApplied: `tollgate migrate` logs how many
// migrations it applied: every one on a new database, none on a database
// already at the latest. An operator reads it to know whether an upgrade's
// migrations ran; a count lost on the way (migrateLogged) said 0 for both.
func TestMigrateSaysHowManyApplied(t *testing.T) {
	t.Setenv("TOLLGATE_DATABASE_URL", ledgertest.NewDatabase(t))
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v, %v", files, err)
	}
	for _, want := range []int{len(files), 0} {
		var logs bytes.Buffer
		if err := migrate(t.Context(), slog.New(slog.NewJSONHandler(&logs, nil)), nil, io.Discard); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), fmt.Sprintf(`"msg":"migrations applied","count":%d}`, want)) {
			t.Fatalf("tollgate migrate logged:\n%s\nwant \"migrations applied\" with count %d", logs.String(), want)
		}
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
