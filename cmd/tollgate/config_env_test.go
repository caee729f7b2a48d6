package main

// The environment tollgate reads: its values refused or taken, the
// variables a role needs before anything starts, and near misses of their
// names (config check and the server commands).

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShutdownGraceNotSilentlyDefaulted: docs/configuration.md lists
// TOLLGATE_SHUTDOWN_GRACE (default 30s) beside TOLLGATE_LOG_LEVEL, whose bad
// value stops the process with a message naming it. A TOLLGATE_SHUTDOWN_GRACE
// that is not a Go duration ("5", "5 s", "-1s") was instead replaced by 30s
// without a word: `TOLLGATE_SHUTDOWN_GRACE=5 tollgate admin` logged
// "shutting down ... grace: 30s" on SIGTERM. An operator who shortened the
// grace for a rolling restart (docs/operations.md, "Upgrades") waited six
// times longer than asked, or was cut off later than planned. The value
// must be refused (or at least not silently become the default).
func TestShutdownGraceNotSilentlyDefaulted(t *testing.T) {
	for _, v := range []string{"5", "5 s", "-1s"} {
		t.Setenv("TOLLGATE_SHUTDOWN_GRACE", v)
		if e, err := loadEnv(); err == nil || e.ShutdownGrace == 30*time.Second {
			t.Errorf("TOLLGATE_SHUTDOWN_GRACE=%q: loadEnv = %v, %v; took it silently as the default; want it refused", v, e.ShutdownGrace, err)
		}
	}
}

// TestEnvValuesAreReadOrRefused: TOLLGATE_SHUTDOWN_GRACE and TOLLGATE_PPROF
// are read when they make sense (any Go duration of 0 or more; the boolean
// spellings of strconv.ParseBool, so TOLLGATE_PPROF=true turns profiles on
// as =1 does) and otherwise refused as a bad TOLLGATE_LOG_LEVEL is: one
// line naming the variable and what it wants, exit code 2.
func TestEnvValuesAreReadOrRefused(t *testing.T) {
	for _, tc := range []struct {
		grace, pprof string
		want         env
		err          string // in the error, when refused
	}{
		{"", "", env{ShutdownGrace: 30 * time.Second}, ""},
		{"0s", "1", env{ShutdownGrace: 0, Pprof: true}, ""},
		{"1m30s", "true", env{ShutdownGrace: 90 * time.Second, Pprof: true}, ""},
		{"", "TRUE", env{ShutdownGrace: 30 * time.Second, Pprof: true}, ""},
		{"", "false", env{ShutdownGrace: 30 * time.Second}, ""},
		{"", "0", env{ShutdownGrace: 30 * time.Second}, ""},
		{"5", "", env{}, `TOLLGATE_SHUTDOWN_GRACE="5": want a duration`},
		{"-1s", "", env{}, `TOLLGATE_SHUTDOWN_GRACE="-1s": want a duration of 0 or more`},
		{"", "yes please", env{}, `TOLLGATE_PPROF="yes please": want 1 or true`},
		{"", "on", env{}, `TOLLGATE_PPROF="on"`},
	} {
		t.Setenv("TOLLGATE_SHUTDOWN_GRACE", tc.grace)
		t.Setenv("TOLLGATE_PPROF", tc.pprof)
		e, err := loadEnv()
		if tc.err == "" {
			if err != nil || e.ShutdownGrace != tc.want.ShutdownGrace || e.Pprof != tc.want.Pprof {
				t.Errorf("grace %q, pprof %q: loadEnv = grace %v, pprof %v, %v; want %v, %v",
					tc.grace, tc.pprof, e.ShutdownGrace, e.Pprof, err, tc.want.ShutdownGrace, tc.want.Pprof)
			}
			continue
		}
		var ee *envError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("grace %q, pprof %q: loadEnv error %v; want an envError with %q", tc.grace, tc.pprof, err, tc.err)
			continue
		}
		var stderr bytes.Buffer
		if code := serverExit("admin", err, &stderr); code != exitUsage ||
			stderr.String() != "tollgate admin: "+err.Error()+"\n" {
			t.Errorf("grace %q, pprof %q: exit %d, stderr %q; want exit 2 and the error in one line", tc.grace, tc.pprof, code, stderr.String())
		}
	}
	// A server command refuses it before it opens the database.
	t.Setenv("TOLLGATE_SHUTDOWN_GRACE", "5")
	t.Setenv("TOLLGATE_PPROF", "")
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	for _, cmd := range []string{"admin", "migrate"} {
		var ee *envError
		if err := runServer(t.Context(), slog.New(slog.DiscardHandler), cmd, nil, io.Discard); !errors.As(err, &ee) {
			t.Errorf("tollgate %s with TOLLGATE_SHUTDOWN_GRACE=5: %v; want it refused before the database is opened", cmd, err)
		}
	}

	// `tollgate config check` says so too, with every other variable a
	// process could not use; it used to call the file valid and exit 0.
	t.Setenv("TOLLGATE_LISTEN", "nope")
	t.Setenv("TOLLGATE_ADMIN_LISTEN", ":99999")
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://u:hunter2@db:port/ledger")
	var out, errOut bytes.Buffer
	code := configCheck([]string{"--config", "../../examples/demo.yaml"}, &out, &errOut)
	for _, want := range []string{"The environment is not valid: 4 problems.", `TOLLGATE_SHUTDOWN_GRACE="5": want a duration`,
		`TOLLGATE_LISTEN="nope": want host:port`, `TOLLGATE_ADMIN_LISTEN=":99999": want host:port`, "TOLLGATE_DATABASE_URL: cannot parse"} {
		if code != exitInvalid || !strings.Contains(errOut.String(), want) {
			t.Errorf("config check with a bad environment: exit %d, stderr:\n%s\nwant exit 5 and %q", code, errOut.String(), want)
		}
	}
	if strings.Contains(errOut.String(), "hunter2") {
		t.Errorf("config check printed the database password:\n%s", errOut.String())
	}
	for _, v := range []string{"TOLLGATE_SHUTDOWN_GRACE", "TOLLGATE_DATABASE_URL"} {
		t.Setenv(v, "")
	}
	t.Setenv("TOLLGATE_LISTEN", "127.0.0.1:http")
	t.Setenv("TOLLGATE_ADMIN_LISTEN", "[::1]:0")
	out.Reset()
	errOut.Reset()
	if code := configCheck([]string{"--config", "../../examples/demo.yaml"}, &out, &errOut); code != exitOK || errOut.Len() > 0 {
		t.Errorf("config check with a good environment: exit %d, stderr %q; want 0", code, errOut.String())
	}
}

// refusalContext is the context of a runServer expected to refuse its
// start at once: ended after 20 s, so that a process that starts instead
// (and waits for its unreachable database) fails the test with its
// error, not the package's whole run at its timeout.
func refusalContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAdminTokenRequiredBeforeAnythingStarts: `tollgate serve` without
// TOLLGATE_ADMIN_TOKEN opened the database, applied the migrations, started
// the embedded JetStream and the gateway's listener, logged a WARN "NATS:
// disconnected; reconnecting" while tearing them down, and only then said
// "the admin token is empty", exit 1. A missing required variable is refused
// as a bad TOLLGATE_SHUTDOWN_GRACE is: before the database, exit code 2, one
// line naming the variable. The roles without the admin API do not need it.
func TestAdminTokenRequiredBeforeAnythingStarts(t *testing.T) {
	t.Setenv("TOLLGATE_DATA_DIR", t.TempDir()) // meter takes its lock before it reaches the database
	t.Setenv("TOLLGATE_ADMIN_TOKEN", "")
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	for _, tc := range []struct {
		cmd  string
		args []string
	}{{"serve", []string{"--config", "../../examples/demo.yaml"}}, {"admin", nil}} {
		err := runServer(refusalContext(t), slog.New(slog.DiscardHandler), tc.cmd, tc.args, io.Discard)
		var ee *envError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "TOLLGATE_ADMIN_TOKEN is not set") {
			t.Errorf("tollgate %s without TOLLGATE_ADMIN_TOKEN: %v; want it refused before the database is opened", tc.cmd, err)
			continue
		}
		var stderr bytes.Buffer
		if code := serverExit(tc.cmd, err, &stderr); code != exitUsage || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("tollgate %s without TOLLGATE_ADMIN_TOKEN: exit %d, stderr %q; want exit 2 and one line", tc.cmd, code, stderr.String())
		}
	}
	// meter has no admin API: what stops it is not the token (here the
	// TOLLGATE_NATS_URL it lacks).
	if err := runServer(refusalContext(t), slog.New(slog.DiscardHandler), "meter", nil, io.Discard); err == nil ||
		strings.Contains(err.Error(), "TOLLGATE_ADMIN_TOKEN") {
		t.Errorf("tollgate meter without TOLLGATE_ADMIN_TOKEN: %v; want another error than the token", err)
	}
}

// TestNATSURLRequiredBeforeAnythingStarts: `tollgate meter` and `tollgate
// gateway` without TOLLGATE_NATS_URL exited 1, where every other unusable
// setting exits 2 before anything starts (a user's walkthrough).
func TestNATSURLRequiredBeforeAnythingStarts(t *testing.T) {
	t.Setenv("TOLLGATE_DATA_DIR", t.TempDir())
	t.Setenv("TOLLGATE_NATS_URL", "")
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	for _, tc := range []struct {
		cmd  string
		args []string
	}{{"meter", nil}, {"gateway", []string{"--config", "../../examples/demo.yaml"}}} {
		err := runServer(refusalContext(t), slog.New(slog.DiscardHandler), tc.cmd, tc.args, io.Discard)
		var stderr bytes.Buffer
		if code := serverExit(tc.cmd, err, &stderr); code != exitUsage ||
			stderr.String() != "tollgate "+tc.cmd+": TOLLGATE_NATS_URL is required: only `tollgate serve` embeds JetStream\n" {
			t.Errorf("tollgate %s without TOLLGATE_NATS_URL: exit %d, stderr %q; want exit 2 and the variable named", tc.cmd, code, stderr.String())
		}
	}
}

// TestBadListenAddressBeforeAnythingStarts: serve with TOLLGATE_LISTEN=nope
// opened the database, applied the migrations and started the embedded
// NATS before its listener failed (exit 1); now the address is refused
// first, as config check refuses it, with exit code 2. A meter (no LLM
// listener) does not care about TOLLGATE_LISTEN.
func TestBadListenAddressBeforeAnythingStarts(t *testing.T) {
	t.Setenv("TOLLGATE_DATA_DIR", t.TempDir()) // meter takes its lock before it reaches the database
	t.Setenv("TOLLGATE_ADMIN_TOKEN", "t")
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	// The meter needs a NATS URL before anything else (exit 2 without one):
	// one that nothing answers, since it must fail at the database first.
	t.Setenv("TOLLGATE_NATS_URL", "nats://127.0.0.1:1")
	for _, tc := range []struct{ cmd, variable string }{
		{"serve", "TOLLGATE_LISTEN"}, {"serve", "TOLLGATE_ADMIN_LISTEN"}, {"meter", "TOLLGATE_ADMIN_LISTEN"}} {
		t.Setenv("TOLLGATE_LISTEN", ":0")
		t.Setenv("TOLLGATE_ADMIN_LISTEN", ":0")
		t.Setenv(tc.variable, "nope")
		var args []string
		if tc.cmd == "serve" {
			args = []string{"--config", "../../examples/demo.yaml"}
		}
		err := runServer(t.Context(), slog.New(slog.DiscardHandler), tc.cmd, args, io.Discard)
		var ee *envError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.variable+`="nope"`) {
			t.Errorf("tollgate %s with %s=nope: %v; want it refused before the database is opened", tc.cmd, tc.variable, err)
			continue
		}
		if code := serverExit(tc.cmd, err, io.Discard); code != exitUsage {
			t.Errorf("tollgate %s with %s=nope: exit %d, want %d", tc.cmd, tc.variable, code, exitUsage)
		}
	}
	// The meter goes past it, to wait for the database (unreachable here):
	// stopped while it waits, it returns no setting's error.
	t.Setenv("TOLLGATE_LISTEN", "nope")
	t.Setenv("TOLLGATE_ADMIN_LISTEN", ":0")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	// A stop while it waits is a stop as asked: no error, exit code 0.
	if err := runServer(ctx, slog.New(slog.DiscardHandler), "meter", nil, io.Discard); err != nil {
		t.Errorf("tollgate meter with TOLLGATE_LISTEN=nope, stopped while it waits for the database: %v; "+
			"want it to go on to the database (it has no LLM listener), and no error for the stop", err)
	}
}

// TestConfigCheckEnvDatabaseURLAsServeParsesIt: config check parsed
// TOLLGATE_DATABASE_URL with pgx.ParseConfig, but serve, migrate and the
// rest open it with ledger.Open, which parses it with pgxpool.ParseConfig:
// the pool's own settings (pool_max_conns, pool_min_conns,
// pool_max_conn_lifetime, ...) were not checked, so a URL that every
// command refuses ("parse database url: cannot parse ... invalid
// pool_max_conns") was called valid, exit 0. (Found by review.)
func TestConfigCheckEnvDatabaseURLAsServeParsesIt(t *testing.T) {
	for _, u := range []string{
		"postgres://u@db/ledger?pool_max_conns=abc",
		"postgres://u@db/ledger?pool_max_conns=0",
		"host=db dbname=ledger pool_max_conn_lifetime=soon",
	} {
		t.Setenv("TOLLGATE_DATABASE_URL", u)
		var out, errOut bytes.Buffer
		if code := configCheck([]string{"--config", "../../examples/demo.yaml"}, &out, &errOut); code != exitInvalid ||
			!strings.Contains(errOut.String(), "TOLLGATE_DATABASE_URL") {
			t.Errorf("config check with TOLLGATE_DATABASE_URL=%q (which serve refuses to parse): exit %d, stderr %q; want exit 5 naming it",
				u, code, errOut.String())
		}
	}
}

// TestConfigCheckEnvListsEveryProblem: config check lists each bad
// variable; it took loadEnv's first error only, so with both
// TOLLGATE_SHUTDOWN_GRACE and TOLLGATE_PPROF bad only the first was named,
// and the second showed up only after the first was fixed.
func TestConfigCheckEnvListsEveryProblem(t *testing.T) {
	t.Setenv("TOLLGATE_SHUTDOWN_GRACE", "5")
	t.Setenv("TOLLGATE_PPROF", "yes")
	t.Setenv("TOLLGATE_LOG_LEVEL", "loud") // stopped `config check` before it ran, the others unnamed
	var out, errOut bytes.Buffer
	code := configCheck([]string{"--config", "../../examples/demo.yaml"}, &out, &errOut)
	for _, want := range []string{"TOLLGATE_SHUTDOWN_GRACE=", "TOLLGATE_PPROF=", "TOLLGATE_LOG_LEVEL="} {
		if code != exitInvalid || !strings.Contains(errOut.String(), want) {
			t.Errorf("config check with two bad variables: exit %d, stderr:\n%s\nwant exit 5 and %q named", code, errOut.String(), want)
		}
	}
}

// TestConfigCheckMisspeltVariables: a misspelt variable was ignored and
// config check called the environment valid, while the process ran on
// the default it was meant to replace (an operator review:
// TOLLGATE_ADMIN_LISTN=127.0.0.1:9 left the admin listener, /metrics and
// pprof without a token, on every interface). A near miss of a variable
// tollgate reads is a problem naming both; the tests' and benchmarks'
// own TOLLGATE_ variables are not.
func TestConfigCheckMisspeltVariables(t *testing.T) {
	t.Setenv("TOLLGATE_ADMIN_LISTN", "127.0.0.1:9")
	t.Setenv("TOLLGATE_DATABSE_URL", "postgres://u@db/ledger")
	t.Setenv("tollgate_listen", ":9")
	var out, errOut bytes.Buffer
	code := configCheck([]string{"--config", "../../examples/demo.yaml"}, &out, &errOut)
	for _, want := range []string{
		"TOLLGATE_ADMIN_LISTN is set, but tollgate reads no such variable: did you mean TOLLGATE_ADMIN_LISTEN?",
		"TOLLGATE_DATABSE_URL is set, but tollgate reads no such variable: did you mean TOLLGATE_DATABASE_URL?",
		"tollgate_listen is set, but tollgate reads no such variable: did you mean TOLLGATE_LISTEN?",
	} {
		if code != exitInvalid || !strings.Contains(errOut.String(), want) {
			t.Errorf("config check with misspelt variables: exit %d, stderr:\n%s\nwant exit 5 and %q", code, errOut.String(), want)
		}
	}
	others := []string{"TOLLGATE_TEST_DATABASE_URL=x", "TOLLGATE_FIXTURES=x", "TOLLGATE_CHROMIUM=x", "TOLLGATE_PGBIN=x",
		"TOLLGATE_BENCH_EVENTS=1", "TOLLGATE_DEMO_CONFIG=x", "TOLLGATE_SCREENSHOTS=x", "TOLLGATE_NATS_SERVER=x",
		"TOLLGATE_DATA_DIR=x", "TOLLGATE_ADMIN_URL=x", "TOLLGATE_=x", "TOLLGATE=x", "PATH=/bin"}
	if got := misspeltEnv(others); len(got) != 0 {
		t.Errorf("misspeltEnv(%q) = %q, want none", others, got)
	}
}

// TestMisspeltEnvOnWindows: Windows' environment names are not case
// sensitive, and os.Getenv("TOLLGATE_LISTEN") reads a variable set as
// tollgate_listen there: config check called it misspelt and "ignored",
// and failed (exit 5), though tollgate ran on it. A near miss is still
// one.
func TestMisspeltEnvOnWindows(t *testing.T) {
	defer func(was bool) { envFoldsCase = was }(envFoldsCase)
	envFoldsCase = true
	got := misspeltEnv([]string{"tollgate_listen=:9", "Tollgate_Admin_Token=x", "TOLLGATE_LISTN=:9"})
	if len(got) != 1 || !strings.HasPrefix(got[0], "TOLLGATE_LISTN is set") {
		t.Errorf("misspeltEnv on Windows = %q, want TOLLGATE_LISTN alone", got)
	}
}

// TestConfigCheckNotesReplicasWithoutACluster: a file asking for 3 replicas
// passes (it may be checked away from its cluster) but says that serve
// without TOLLGATE_NATS_URL refuses it; with the variable set it says nothing.
func TestConfigCheckNotesReplicasWithoutACluster(t *testing.T) {
	t.Setenv("TOLLGATE_NATS_URL", "")
	code, out, errOut := checkConfigText(t, "meter:\n  replicas: 3\n")
	if code != exitOK || !strings.Contains(out, "TOLLGATE_NATS_URL is not set here") || !strings.Contains(out, "meter.replicas is 3") {
		t.Errorf("replicas 3 without a NATS URL: exit %d, said:\n%s%s", code, out, errOut)
	}
	t.Setenv("TOLLGATE_NATS_URL", "nats://n1:4222,nats://n2:4222,nats://n3:4222")
	if code, out, errOut := checkConfigText(t, "meter:\n  replicas: 3\n"); code != exitOK || strings.Contains(out, "TOLLGATE_NATS_URL is not set") {
		t.Errorf("replicas 3 with a NATS URL: exit %d, said:\n%s%s", code, out, errOut)
	}
}

// TestConfigCheckEnvListedBesideFileProblems: an operator review ran
// config check on a file with a problem in an environment with a bad
// TOLLGATE_LOG_LEVEL and a misspelt TOLLGATE_ADMIN_LISTN: only the file's
// problems were listed, though docs/configuration.md says the log level
// is listed "beside the other problems"; the variables showed up only
// once the file was fixed, a second round trip for one check.
func TestConfigCheckEnvListedBesideFileProblems(t *testing.T) {
	t.Setenv("TOLLGATE_LOG_LEVEL", "loud")
	t.Setenv("TOLLGATE_ADMIN_LISTN", "127.0.0.1:9")
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("providers:\n  - {name: p, type: openai, base_url: http://127.0.0.1:9/v1, api_key: x}\nmodels:\n  - {name: m, provider: nope}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := configCheck([]string{"--config", path}, &out, &errOut)
	for _, want := range []string{`provider "nope"`, "TOLLGATE_LOG_LEVEL=", "TOLLGATE_ADMIN_LISTN"} {
		if code != exitInvalid || !strings.Contains(errOut.String(), want) {
			t.Errorf("config check of a bad file in a bad environment: exit %d, stderr:\n%s\nwant exit 5 and %q named", code, errOut.String(), want)
		}
	}
}

// TestMisspeltEnvTwoEditsAway: a name two edits from one tollgate reads
// (TOLLGATE_ADMN_LISTN) is still said, as misspeltEnv's doc and the guide
// promise (a mutation audit: a bound of one edit passed every test).
func TestMisspeltEnvTwoEditsAway(t *testing.T) {
	got := misspeltEnv([]string{"TOLLGATE_ADMN_LISTN=127.0.0.1:8081"})
	if len(got) != 1 || !strings.Contains(got[0], "did you mean TOLLGATE_ADMIN_LISTEN?") {
		t.Fatalf("misspeltEnv: %q, want one sentence naming TOLLGATE_ADMIN_LISTEN", got)
	}
}
