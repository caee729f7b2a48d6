package dashboards

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// healthySeries model a healthy `tollgate serve` scraped every minute for
// 20 minutes: 60 requests a minute, all ok, each with a first token under
// 100 ms; nothing in flight, nothing spooled, no dead letter (each reason's
// series at 0 from the start, as the registry holds them).
var healthySeries = map[string]string{
	`tollgate_gateway_requests_total{endpoint="/v1/chat/completions",provider="sim",model="sim-pro",status="ok"}`: "0+60x20",
	`tollgate_gateway_ttft_seconds_bucket{provider="sim",model="sim-pro",le="0.05"}`:                              "0x20",
	`tollgate_gateway_ttft_seconds_bucket{provider="sim",model="sim-pro",le="0.1"}`:                               "0+60x20",
	`tollgate_gateway_ttft_seconds_bucket{provider="sim",model="sim-pro",le="+Inf"}`:                              "0+60x20",
	`tollgate_gateway_in_flight`:                                "0x20",
	`tollgate_meter_spool_events`:                               "0x20",
	`tollgate_meter_dead_letters_total{reason="undecodable"}`:   "0x20",
	`tollgate_meter_dead_letters_total{reason="refused"}`:       "0x20",
	`tollgate_meter_dead_letters_total{reason="max_deliver"}`:   "0x20",
	`tollgate_meter_dead_letters_total{reason="unpublishable"}`: "0x20",
}

// healthyStats is what each stat panel of operations.json shows for
// healthySeries: a figure, never "No data" (a stat panel an operator
// reads at a glance: empty reads as broken, or as no traffic).
var healthyStats = map[string]float64{
	"Requests / s":         1,
	"Not ok":               0,
	"TTFT p99":             0.0995, // 0.05 + 0.99 of the 0.05-0.1 bucket
	"In flight":            0,
	"Spooled events":       0,
	"Dead letters (range)": 0,
}

// healthyTokens add to healthySeries the tokens of a model that reports
// neither cached nor reasoning tokens (as most do): 8 prompt and 20
// completion tokens a request.
var healthyTokens = map[string]string{
	`tollgate_gateway_tokens_total{provider="sim",model="sim-small",class="prompt"}`:     "0+480x20",
	`tollgate_gateway_tokens_total{provider="sim",model="sim-small",class="completion"}`: "0+1200x20",
}

// healthyShares is what the share panels of operations.json show, by
// legend, for healthySeries and healthyTokens: 0, not an empty graph,
// for a share of tokens no model reports.
var healthyShares = map[string]float64{
	"cached / prompt":        0,
	"reasoning / completion": 0,
}

// TestStatPanelsOfAHealthyStack evaluates every stat panel's query of
// operations.json with promtool against healthySeries and checks the
// figure it shows.
func TestStatPanelsOfAHealthyStack(t *testing.T) {
	var tests []exprTest
	seen := map[string]bool{}
	for _, p := range operationsPanels(t) {
		if p.Type != "stat" {
			continue
		}
		want, ok := healthyStats[p.Title]
		if !ok {
			t.Errorf("stat panel %q: no figure for a healthy stack in healthyStats", p.Title)
			continue
		}
		seen[p.Title] = true
		for _, tg := range p.Targets {
			tests = append(tests, exprTest{grafanaExpr(tg.Expr), "20m", []sample{{"{}", want}}})
		}
	}
	for title := range healthyStats {
		if !seen[title] {
			t.Errorf("operations.json has no stat panel %q", title)
		}
	}
	promtoolExprTests(t, healthySeries, tests)
}

// TestSharePanelsOfAHealthyStack: a share of tokens that no model reports
// (cached, reasoning) reads 0 while there is traffic; its line was missing
// (the numerator selects no series), which reads as no data rather than
// as nothing cached.
func TestSharePanelsOfAHealthyStack(t *testing.T) {
	input := map[string]string{}
	for _, m := range []map[string]string{healthySeries, healthyTokens} {
		for k, v := range m {
			input[k] = v
		}
	}
	var tests []exprTest
	for _, p := range operationsPanels(t) {
		for _, tg := range p.Targets {
			if want, ok := healthyShares[tg.Legend]; ok {
				tests = append(tests, exprTest{grafanaExpr(tg.Expr), "20m", []sample{{"{}", want}}})
			}
		}
	}
	if len(tests) != len(healthyShares) {
		t.Fatalf("operations.json has %d of the %d share series", len(tests), len(healthyShares))
	}
	promtoolExprTests(t, input, tests)
}

func operationsPanels(t *testing.T) []panel {
	t.Helper()
	for _, d := range loadDashboards(t) {
		if d.file == "operations.json" {
			return d.leafPanels()
		}
	}
	t.Fatal("no operations.json")
	return nil
}

// grafanaExpr is expr as Grafana sends it with every model selected.
func grafanaExpr(expr string) string {
	return strings.NewReplacer(`$__rate_interval`, "5m", `$__range`, "1h", `"$model"`, `".*"`).Replace(expr)
}

type sample struct {
	Labels string  `json:"labels"`
	Value  float64 `json:"value"`
}

type exprTest struct {
	Expr       string   `json:"expr"`
	EvalTime   string   `json:"eval_time"`
	ExpSamples []sample `json:"exp_samples"`
}

// promtoolExprTests runs tests with `promtool test rules` on input, series
// scraped every minute (under CI=true it fails when promtool is missing).
func promtoolExprTests(t *testing.T, input map[string]string, tests []exprTest) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("promtool is not installed (apt-get install prometheus): %v", err)
		}
		t.Skip("promtool is not installed: apt-get install prometheus to run this test (under CI=true this fails)")
	}
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	var in []series
	for s, v := range input {
		in = append(in, series{s, v})
	}
	file := map[string]any{
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": in, "promql_expr_test": tests}},
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "panels_test.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), promtool, "test", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}
