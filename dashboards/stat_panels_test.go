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

// TestStatPanelsOfAHealthyStack evaluates every stat panel's query of
// operations.json with promtool against healthySeries and checks the
// figure it shows.
func TestStatPanelsOfAHealthyStack(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("promtool is not installed (apt-get install prometheus): %v", err)
		}
		t.Skip("promtool is not installed: apt-get install prometheus to run this test (under CI=true this fails)")
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
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	var input []series
	for s, v := range healthySeries {
		input = append(input, series{s, v})
	}
	var tests []exprTest
	seen := map[string]bool{}
	for _, d := range loadDashboards(t) {
		if d.file != "operations.json" {
			continue
		}
		for _, p := range d.leafPanels() {
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
				expr := strings.NewReplacer(`$__rate_interval`, "5m", `$__range`, "1h", `"$model"`, `".*"`).Replace(tg.Expr)
				tests = append(tests, exprTest{expr, "20m", []sample{{"{}", want}}})
			}
		}
	}
	for title := range healthyStats {
		if !seen[title] {
			t.Errorf("operations.json has no stat panel %q", title)
		}
	}
	file := map[string]any{
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": input, "promql_expr_test": tests}},
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stat_panels_test.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), promtool, "test", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}
