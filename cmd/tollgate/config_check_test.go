package main

import (
	"bytes"
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

// TestConfigCheckEveryProblemAfterADeploymentsName: a deployment named as
// another of its model (or with a name too long) dropped its whole model
// from the check, so the model's other problems, and a second model of the
// same name, went unsaid until it was fixed.
func TestConfigCheckEveryProblemAfterADeploymentsName(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - {name: east, type: openai, base_url: "http://127.0.0.1:9090/v1", api_key: x}
  - {name: west, type: openai, base_url: "http://127.0.0.1:9091/v1", api_key: x}
models:
  - name: smart
    deployments:
      - {name: d1, provider: east, upstream_model: gpt-4o}
      - {name: d1, provider: west, upstream_model: gpt-4o}
      - {provider: west, upstream_model: gpt-4o-mini, weight: -1}
    fallbacks: [nowhere]
  - name: other
    provider: east
  - name: smart
    provider: west
`)
	for _, want := range []string{
		`is not valid: 4 problems.`,
		`models[0] ("smart").deployments[1] ("d1"): a deployment named "d1" is already defined for this model (name them apart) (line 8).`,
		`models[0] ("smart").deployments[2]: weight must be a positive integer, got -1 (line 9).`,
		`models[0] ("smart").fallbacks[0]: "nowhere" is not another model defined under models (line 10).`,
		`models[2] ("smart"): a model with this name is already defined (line 13).`,
	} {
		if code != exitInvalid || !strings.Contains(got, want) {
			t.Errorf("exit %d, said:\n%s\nwant it to contain %q", code, got, want)
		}
	}
}

// TestConfigCheckSaysADuplicateOfAModelItCannotRepair: a model config
// check could not repair (provider and deployments both given, then) was
// left out of the rest of the check, name and all, so a second model of its
// name went unsaid until the first was fixed; such a model now stands in
// under its name (and this one is repaired since).
func TestConfigCheckSaysADuplicateOfAModelItCannotRepair(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - {name: east, type: openai, base_url: "http://127.0.0.1:9090/v1", api_key: x}
  - {name: west, type: openai, base_url: "http://127.0.0.1:9091/v1", api_key: x}
models:
  - name: smart
    provider: east
    deployments:
      - {provider: west, upstream_model: gpt-4o}
      - {provider: east, upstream_model: gpt-4o}
  - name: smart
    provider: west
  - name: x
    provider: east
    fallbacks: [smart]
`)
	for _, want := range []string{
		`is not valid: 2 problems.`,
		`models[0] ("smart"): give provider or deployments, not both (line 5).`,
		`models[1] ("smart"): a model with this name is already defined (line 10).`,
	} {
		if code != exitInvalid || !strings.Contains(got, want) {
			t.Errorf("exit %d, said:\n%s\nwant it to contain %q", code, got, want)
		}
	}
}

// TestConfigCheckEveryProblemOfASecondModelOfAName: a model named as an
// earlier one was meant to go on under a stand-in name, but was left out of
// the check, so its own problems (a deployment's weight) went unsaid until
// it was renamed.
func TestConfigCheckEveryProblemOfASecondModelOfAName(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - {name: p, type: openai, base_url: "http://127.0.0.1:9090/v1", api_key: x}
models:
  - name: a
    provider: p
  - name: a
    deployments: [{provider: p, weight: -3}]
`)
	for _, want := range []string{
		`is not valid: 2 problems.`,
		`models[1] ("a"): a model with this name is already defined (line 6).`,
		`models[1] ("a").deployments[0]: weight must be a positive integer, got -3 (line 7).`,
	} {
		if code != exitInvalid || !strings.Contains(got, want) {
			t.Errorf("exit %d, said:\n%s\nwant it to contain %q", code, got, want)
		}
	}
}

// TestConfigCheckEveryProblemOfAModelWithProviderAndDeployments: a model
// giving both provider and deployments was left out of the check at that
// problem, so its deployments' and fallbacks' problems went unsaid until
// it was fixed; the check goes on with its deployments.
func TestConfigCheckEveryProblemOfAModelWithProviderAndDeployments(t *testing.T) {
	code, _, got := checkConfigText(t, `providers:
  - {name: p, type: openai, base_url: "http://127.0.0.1:9090/v1", api_key: x}
models:
  - name: a
    provider: p
    deployments: [{provider: q}, {provider: p, upstream_model: b}]
    fallbacks: [zz]
`)
	for _, want := range []string{
		`is not valid: 3 problems.`,
		`models[0] ("a"): give provider or deployments, not both (line 4).`,
		`models[0] ("a").deployments[0]: provider "q" is not defined under providers (line 6).`,
		`models[0] ("a").fallbacks[0]: "zz" is not another model defined under models (line 7).`,
	} {
		if code != exitInvalid || !strings.Contains(got, want) {
			t.Errorf("exit %d, said:\n%s\nwant it to contain %q", code, got, want)
		}
	}
}
