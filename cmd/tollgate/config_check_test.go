package main

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

// checkConfigText runs `tollgate config check` on a file holding text.
func checkConfigText(t *testing.T, text string) (code int, out, errOut string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	code = configCheck([]string{"--config", path}, &o, &e)
	return code, o.String(), e.String()
}

func TestConfigCheckValid(t *testing.T) {
	for _, path := range []string{"../../examples/demo.yaml", "../../deploy/tollgate.yaml"} {
		var out, errOut bytes.Buffer
		if code := configCheck([]string{path}, &out, &errOut); code != exitOK ||
			!strings.Contains(out.String(), "is valid: 3 providers, 4 models, 4 seed prices") {
			t.Errorf("%s: exit %d, %s %s", path, code, out.String(), errOut.String())
		}
	}
}

// TestConfigCheckTheGuidesFile: the file docs/configuration.md shows,
// every setting annotated, is a valid configuration as it stands (it
// named providers it did not define, and put h2c on an https:// URL).
func TestConfigCheckTheGuidesFile(t *testing.T) {
	guide, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(guide), "## The file\n\n```yaml\n")
	file, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed {
		t.Fatal("docs/configuration.md has no yaml block under \"## The file\"")
	}
	t.Setenv("OPENAI_API_KEY", "sk-guide-123456789")
	if code, out, errOut := checkConfigText(t, file); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
}

// TestConfigCheckEveryDocsYAML: every yaml block of README.md and docs/
// is a configuration file config check finds valid as it stands (the
// README's providers and its meter: section are copied into files as
// they are), its providers' api_key_env set.
func TestConfigCheckEveryDocsYAML(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(v, "sk-docs-123456789")
	}
	blocks := 0
	for _, path := range append([]string{"../../README.md"}, docs...) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rest := string(text)
		for {
			_, after, ok := strings.Cut(rest, "\n```yaml\n")
			if !ok {
				break
			}
			block, tail, closed := strings.Cut(after, "\n```")
			if !closed {
				t.Fatalf("%s: a yaml block is not closed", path)
			}
			rest, blocks = tail, blocks+1
			if code, out, errOut := checkConfigText(t, block); code != exitOK {
				t.Errorf("%s, yaml block %q…: exit %d: %s%s", path, block[:min(len(block), 40)], code, out, errOut)
			}
		}
	}
	if blocks < 3 {
		t.Fatalf("found %d yaml blocks in README.md and docs/, want the README's two and configuration.md's", blocks)
	}
}

// TestConfigCheckEveryProblem: one run lists every problem of a file, the
// decoder's and each validator's, one sentence each, in the file's order,
// naming the setting as the file spells it and its line, never a Go type
// or field name.
func TestConfigCheckEveryProblem(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - name: sim
    type: foo
    base_url: http://127.0.0.1:9090/v1
    connect_timeout: 5
  - name: sim2
    type: openai
    base_url: notaurl
    stall_timeout: "5"
models:
  - name: a
    provider: sim
  - name: gpt-x
    provider: foo
  - name: gpt-x
    provider: sim2
  - name: z
    provider: nope
    upstrem_model: q
prices:
  - model: a
    currency: USD
    input: "abc"
    output: "1"
    effective_from: 2026-01-01T00:00:00Z
  - model: z
    currency: USD
    input: "1.5"
meter:
  batch_size: lots
  replicas: 2
  max_deliver: 1
  write_lanes: 17
`)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d:\n%s", code, exitInvalid, got)
	}
	want := []string{
		`is not valid: 15 problems.`,
		`  - providers[0] ("sim"): type "foo" is not one of openai, anthropic, gemini (line 3).`,
		`  - providers[0] ("sim").connect_timeout: "5" is not a duration; write e.g. "30s"`,
		`  - providers[1] ("sim2"): base_url "notaurl" is not an http(s) URL (line 8).`,
		`  - providers[1] ("sim2").stall_timeout: "5" is not a duration; write e.g. "30s", "500ms" or "5m" (line 9).`,
		`  - models[1] ("gpt-x"): provider "foo" is not defined under providers (line 14).`,
		`  - models[2] ("gpt-x"): a model with this name is already defined (line 15).`,
		`  - models[3] ("z"): provider "nope" is not defined under providers (line 18).`,
		`  - models[3] ("z"): "upstrem_model" is not a setting here; did you mean "upstream_model"? (line 19;`,
		`  - prices[0] ("a"): input: "abc" is not a decimal number (line 23).`,
		`  - prices[1] ("z"): effective_from is required`,
		`  - prices[1] ("z"): output is required: a decimal amount per million tokens, e.g. "2.50" (line 26).`,
		`  - meter.batch_size: "lots" is not a whole number; write e.g. 2000 (line 30).`,
		`  - meter.replicas must be 1, 3 or 5, not 2 (line 31).`,
		`  - meter.max_deliver must be at least 2, not 1 (line 32).`,
		`  - meter.write_lanes must be between 1 and 16, not 17 (line 33).`,
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != len(want) {
		t.Fatalf("config check said %d lines, want %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %q\nwant it to contain %q", i+1, lines[i], w)
		}
	}
	for _, goism := range []string{"Models[", "Providers[", "time.Duration", "gateway.", "meter.Config", "unmarshal", "!!"} {
		if strings.Contains(got, goism) {
			t.Errorf("config check speaks Go (%q):\n%s", goism, got)
		}
	}
}

// TestConfigCheckEveryNegativeSetting: a negative size or duration ended
// the check there, without its line, and hid the provider and model
// problems after it (a user's walkthrough); each is now listed, with its line.
func TestConfigCheckEveryNegativeSetting(t *testing.T) {
	code, _, got := checkConfigText(t, `max_request_bytes: -1
drain_timeout: -5s
retry:
  max_attempts: -2
  budget: -1s
providers:
  - name: sim
    type: nope
    base_url: http://127.0.0.1:9090/v1
models:
  - name: m
    provider: missing
`)
	want := []string{
		`is not valid: 6 problems.`,
		`  - max_request_bytes must be 0 (its default) or more, not -1 (line 1).`,
		`  - drain_timeout must be 0 (its default) or more, not -5s (line 2).`,
		`  - retry.max_attempts must be 0 (its default) or more, not -2 (line 4).`,
		`  - retry.budget must be 0 (its default) or more, not -1s (line 5).`,
		`  - providers[0] ("sim"): type "nope" is not one of openai, anthropic, gemini (line 8).`,
		`  - models[0] ("m"): provider "missing" is not defined under providers (line 12).`,
	}
	if lines := strings.Split(strings.TrimSpace(got), "\n"); code != exitInvalid || len(lines) != len(want) {
		t.Fatalf("exit %d, want %d, and %d lines, want %d:\n%s", code, exitInvalid, len(lines), len(want), got)
	}
	for i, line := range strings.Split(strings.TrimSpace(got), "\n") {
		if !strings.Contains(line, want[i]) {
			t.Errorf("line %d: %q\nwant it to contain %q", i+1, line, want[i])
		}
	}
}

// TestConfigCheckShapes: empty files, a file that is not a mapping,
// malformed YAML, unknown top-level settings and lists that are not lists
// are each explained.
func TestConfigCheckShapes(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "the file is empty: it configures nothing"},
		{"comments only", "# nothing yet\n", "the file is empty"},
		{"empty mapping", "{}\n", "the file is empty"},
		{"a list", "- a\n- b\n", "the file: a list is not a mapping of settings"},
		{"tabs", "providers:\n\t- name: x\n", "line 2: this is not well-formed YAML"},
		{"top-level typo", "modles: []\n", `"modles" is not a top-level setting; did you mean "models"? (line 1;`},
		{"not a list", "providers: sim\n", `providers: "sim" is not a list; write each entry on its own line starting with "- " (line 1).`},
		{"two documents", "meter: {replicas: 1}\n---\nmeter: {}\n", "more than one YAML document"},
	} {
		code, _, got := checkConfigText(t, tc.text)
		if code != exitInvalid || !strings.Contains(got, tc.want) {
			t.Errorf("%s: exit %d, said:\n%s\nwant exit %d and %q", tc.name, code, got, exitInvalid, tc.want)
		}
	}
	// A file the others find fine but that routes nothing says so.
	code, out, errOut := checkConfigText(t, "meter:\n  batch_size: 100\n")
	if code != exitOK || !strings.Contains(out, "defines no provider") {
		t.Errorf("meter-only file: exit %d, %s%s", code, out, errOut)
	}
	// loadConfig, which serve uses, refuses an empty file too.
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(empty); err == nil || !strings.Contains(err.Error(), "the file is empty") {
		t.Errorf("loadConfig of an empty file: %v", err)
	}
	if _, err := loadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("loadConfig of a missing file: %v", err)
	}
}

// TestConfigCommandHelp: `tollgate config --help` exits 0 with the usage on
// stdout, like every other --help; a bad invocation exits 2.
func TestConfigCommandHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"check", "--help"}, {"check", "--config", "x.yaml", "-h"}} {
		var out, errOut bytes.Buffer
		if code := configCommand(args, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "Usage: tollgate config check") || errOut.Len() > 0 {
			t.Errorf("tollgate config %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out.String(), errOut.String())
		}
	}
	if r := runTollgate(t, nil, "help", "config"); r.code != exitOK || !strings.Contains(r.out, "Usage: tollgate config check") {
		t.Errorf("tollgate help config: exit %d, %q %q", r.code, r.out, r.errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage: tollgate config check"},
		{[]string{"lint"}, `unknown command "lint"`},
		{[]string{"check"}, "give the file to check"},
		{[]string{"check", "a.yaml", "b.yaml"}, `unexpected argument "b.yaml"`},
		{[]string{"check", "--strict", "a.yaml"}, "unknown flag --strict"},
	} {
		var out, errOut bytes.Buffer
		if code := configCommand(tc.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("tollgate config %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, errOut.String(), exitUsage, tc.want)
		}
	}
}

// TestConfigCheckProtocol: a provider's protocol is h2c or left out, and
// h2c needs an http:// base URL; config check names the setting and its
// line, and passes a valid h2c provider.
func TestConfigCheckProtocol(t *testing.T) {
	code, out, errOut := checkConfigText(t, `providers:
  - {name: local, type: openai, base_url: http://127.0.0.1:9090/v1, protocol: h2c}
models:
  - {name: m, provider: local}
`)
	if code != exitOK || !strings.Contains(out, "is valid: 1 providers, 1 models") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	code, _, got := checkConfigText(t, `providers:
  - name: tls
    type: openai
    base_url: https://api.example.com/v1
    protocol: h2c
  - name: odd
    type: openai
    base_url: http://127.0.0.1:9090/v1
    protocol: http3
models:
  - {name: a, provider: tls}
  - {name: b, provider: odd}
`)
	want := []string{
		`is not valid: 2 problems.`,
		`  - providers[0] ("tls"): protocol h2c needs an http:// base_url; over https:// HTTP/2 is negotiated by itself, so leave protocol out (line 5).`,
		`  - providers[1] ("odd"): protocol "http3" is not known: give h2c (cleartext HTTP/2 with prior knowledge) or leave it out (HTTP/1.1, or HTTP/2 negotiated over https) (line 9).`,
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if code != exitInvalid || len(lines) != len(want) {
		t.Fatalf("exit %d, %d lines, want %d and %d:\n%s", code, len(lines), exitInvalid, len(want), got)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %q\nwant it to contain %q", i+1, lines[i], w)
		}
	}
}

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
		err := runServer(t.Context(), slog.New(slog.DiscardHandler), tc.cmd, tc.args, io.Discard)
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
	if err := runServer(t.Context(), slog.New(slog.DiscardHandler), "meter", nil, io.Discard); err == nil ||
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
		err := runServer(t.Context(), slog.New(slog.DiscardHandler), tc.cmd, tc.args, io.Discard)
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
	err := runServer(ctx, slog.New(slog.DiscardHandler), "meter", nil, io.Discard)
	var ee *envError
	if errors.As(err, &ee) {
		t.Errorf("tollgate meter with TOLLGATE_LISTEN=nope: %v; want it to go on to the database: it has no LLM listener", err)
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

// TestConfigCheckBadTimes: a price's effective_from that is no time
// stopped the decoder, and config check said only "this is not
// well-formed YAML (parsing time ...)", with no line, hiding every other
// problem (a new operator's review). Each bad time is now a problem with
// its setting and line, beside the file's others.
func TestConfigCheckBadTimes(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - name: sim
    type: foo
    base_url: http://127.0.0.1:9090/v1
models:
  - {name: a, provider: sim}
prices:
  - model: a
    currency: USD
    input: "1"
    output: "1"
    effective_from: "yesterday"
  - {model: a, currency: USD, input: "1", output: "1", effective_from: 2026-13-01T00:00:00Z, effective_to: 'soon'}
`)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d:\n%s", code, exitInvalid, got)
	}
	for _, w := range []string{
		`is not valid: 4 problems.`,
		`providers[0] ("sim"): type "foo" is not one of`,
		`prices[0] ("a").effective_from: "yesterday" is not a time: write one like 2026-01-01T00:00:00Z (RFC 3339, with its zone) (line 12).`,
		`prices[1] ("a").effective_from: "2026-13-01T00:00:00Z" is not a time`,
		`prices[1] ("a").effective_to: "soon" is not a time`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("config check said:\n%s\nwant it to hold %q", got, w)
		}
	}
	if strings.Contains(got, "well-formed") || strings.Contains(got, "parsing time") {
		t.Errorf("config check speaks of the decoder:\n%s", got)
	}
}

// TestConfigCheckBadTimesWrittenEveryWay: the bad time's value as YAML
// writes it (quotes with escapes, an anchor, a tag, text beyond ASCII
// before it on its line, a block scalar) was blanked at the wrong bytes,
// misreporting it or inventing other problems (a code review). Each is
// reported with its line; what cannot be set aside safely is reported
// alone.
func TestConfigCheckBadTimesWrittenEveryWay(t *testing.T) {
	head := "providers:\n  - {name: sim, type: openai, base_url: \"http://127.0.0.1:9090/v1\"}\nmodels:\n  - {name: a, provider: sim}\nprices:\n"
	for _, c := range []struct{ name, price, want string }{
		{"escaped single quote", `  - {model: a, currency: USD, input: "1", output: "1", effective_from: 'it''s soon'}`, `"it's soon" is not a time`},
		{"escaped double quote", `  - {model: a, currency: USD, input: "1", output: "1", effective_from: "so\"on"}`, `"so\"on" is not a time`},
		{"anchor", "  - model: a\n    currency: USD\n    input: \"1\"\n    output: \"1\"\n    effective_from: &t soon", `"soon" is not a time`},
		{"tag", "  - model: a\n    currency: USD\n    input: \"1\"\n    output: \"1\"\n    effective_from: !!str soon", `"soon" is not a time`},
		{"text beyond ASCII first", `  - {model: "é", currency: USD, input: "1", output: "1", effective_from: "é soon", effective_to: bad}`, `"é soon" is not a time`},
		{"block scalar", "  - model: a\n    currency: USD\n    input: \"1\"\n    output: \"1\"\n    effective_from: |\n      soon", `"soon\n" is not a time`},
	} {
		code, _, got := checkConfigText(t, head+c.price+"\n")
		if code != exitInvalid || !strings.Contains(got, c.want) || strings.Contains(got, "null") ||
			strings.Contains(got, "well-formed") || strings.Contains(got, "not a setting") || strings.Contains(got, "is required") {
			t.Errorf("%s: exit %d:\n%s\nwant it to say %s, and nothing invented", c.name, code, got, c.want)
		}
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

// TestConfigZeroDurationIsTheDefault: docs/configuration.md says a setting
// left out, or 0, takes its default, and config check's own messages say
// "must be 0 (its default) or more"; a duration written 0 (no unit, which
// Go's time.ParseDuration and TOLLGATE_SHUTDOWN_GRACE take) was refused as
// "not a duration", so the file the message asked for did not start.
func TestConfigZeroDurationIsTheDefault(t *testing.T) {
	cfg, err := parseConfig("tollgate.yaml", []byte(`providers:
  - name: sim
    type: openai
    base_url: http://127.0.0.1:9090/v1
    api_key: x
    connect_timeout: 0
    stall_timeout: 0
models:
  - name: m
    provider: sim
drain_timeout: 0
retry: {budget: 0, cooldown: 0}
meter:
  ack_wait: 0
  spool_max_age: 0
`), providerTypes())
	if err != nil {
		t.Fatalf("a file with durations of 0 is refused: %v", err)
	}
	if p := cfg.Providers[0]; p.ConnectTimeout != 30*time.Second || p.StallTimeout != 5*time.Minute {
		t.Errorf("connect_timeout 0 is %v, stall_timeout 0 is %v: want their defaults, 30s and 5m", p.ConnectTimeout, p.StallTimeout)
	}
	if cfg.DrainTimeout != 30*time.Second || cfg.Retry.Budget != time.Minute || cfg.Retry.Cooldown != 5*time.Second {
		t.Errorf("drain_timeout %v, retry.budget %v, retry.cooldown %v: want 30s, 1m0s, 5s", cfg.DrainTimeout, cfg.Retry.Budget, cfg.Retry.Cooldown)
	}
	if cfg.Meter.AckWait != 30*time.Second || cfg.Meter.SpoolMaxAge != 0 {
		t.Errorf("meter.ack_wait %v, meter.spool_max_age %v: want 30s and 0 (none)", cfg.Meter.AckWait, cfg.Meter.SpoolMaxAge)
	}
	// A number with no unit other than 0 is still refused: 30 is not 30s.
	if code, _, got := checkConfigText(t, "drain_timeout: 30\n"); code != exitInvalid || !strings.Contains(got, `drain_timeout: "30" is not a duration`) {
		t.Errorf("drain_timeout: 30: exit %d, said:\n%s", code, got)
	}
}

// TestConfigCheckNamesTheSettingInAFlowMapping: in a mapping written on one
// line, a value the decoder refused was put on the first setting of the
// line whose value began the same: {stall_timeout: 300s, connect_timeout: 30}
// blamed stall_timeout, which is right, for connect_timeout's "30".
func TestConfigCheckNamesTheSettingInAFlowMapping(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - {name: sim, type: openai, base_url: "http://127.0.0.1:9090/v1", api_key: x, stall_timeout: 300s, connect_timeout: 30}
models: [{name: m, provider: sim}]
`)
	want := `providers[0] ("sim").connect_timeout: "30" is not a duration`
	if code != exitInvalid || !strings.Contains(got, want) {
		t.Errorf("exit %d, said:\n%s\nwant it to name %q", code, got, want)
	}
}

// TestConfigCheckEveryProblemOfAProvider: a provider with a bad protocol
// was dropped from the check there, so its prefix_routes and api_key_env
// problems, and its models' own, went unsaid until the protocol was fixed
// (docs/operations.md: config check lists every problem in one run).
func TestConfigCheckEveryProblemOfAProvider(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - name: sim
    type: openai
    base_url: http://127.0.0.1:9090/v1
    protocol: h3
    prefix_routes: bogus
    api_key_env: TOLLGATE_TEST_UNSET_KEY
models:
  - name: m
    provider: sim
    upstrem_model: x
`)
	for _, want := range []string{
		`is not valid: 4 problems.`,
		`providers[0] ("sim"): protocol "h3" is not known`,
		`providers[0] ("sim"): prefix_routes "bogus" is not known`,
		`providers[0] ("sim"): api_key_env names TOLLGATE_TEST_UNSET_KEY, which is not set`,
		`models[0] ("m"): "upstrem_model" is not a setting here`,
	} {
		if code != exitInvalid || !strings.Contains(got, want) {
			t.Errorf("exit %d, said:\n%s\nwant it to contain %q", code, got, want)
		}
	}
}

// TestConfigCheckEveryProblemOfAModel: a model was dropped from the check
// at its first problem of a deployment's weight or limits, or of a
// fallback, so its next deployment's and fallbacks' problems went unsaid
// until that one was fixed.
func TestConfigCheckEveryProblemOfAModel(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - {name: p, type: openai, base_url: "http://127.0.0.1:9090/v1", api_key: x}
models:
  - name: m
    deployments:
      - {provider: p, weight: -1}
      - {provider: p, upstream_model: b, max_concurrent: -2}
      - {provider: nope}
    fallbacks: [m, zz, m2]
  - name: m2
    provider: p
`)
	for _, want := range []string{
		`is not valid: 5 problems.`,
		`models[0] ("m").deployments[0]: weight must be a positive integer, got -1 (line 6).`,
		`models[0] ("m").deployments[1]: max_concurrent and rpm_limit may not be negative (line 7).`,
		`models[0] ("m").deployments[2]: provider "nope" is not defined under providers (line 8).`,
		`models[0] ("m").fallbacks[0]: "m" is not another model defined under models (line 9).`,
		`models[0] ("m").fallbacks[1]: "zz" is not another model defined under models (line 9).`,
	} {
		if code != exitInvalid || !strings.Contains(got, want) {
			t.Errorf("exit %d, said:\n%s\nwant it to contain %q", code, got, want)
		}
	}
}
