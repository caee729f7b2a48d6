package dashboards

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// alertRules is dashboards/alerts.yml as far as these tests read it.
type alertRules struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Record, Expr, For string
			Labels                   map[string]string
			Annotations              map[string]string
		}
	}
}

// TestAlertRules checks every rule of alerts.yml against the metric
// registry, as the dashboards' queries are, and what an operator needs
// from each alert: a severity, a summary and a description.
func TestAlertRules(t *testing.T) {
	var rules alertRules
	readYAML(t, "dashboards/alerts.yml", &rules, false)
	c := newChecker(t)
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			where := g.Name + ": " + r.Alert + r.Record
			if _, err := c.check(r.Expr, nil); err != nil {
				t.Errorf("%s: %v\n\t%s", where, err, r.Expr)
			}
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: wants a summary and a description", where)
			}
		}
	}
	for _, want := range []string{"TollgateSpoolGrowing", "TollgateSpoolNotDraining", "TollgateMeterLagging",
		"TollgateMeterStalled", "TollgateDeadLetters", "TollgateUnpricedEvents", "TollgateUpstreamErrors",
		"TollgateEmbeddedNATSRestarted", "TollgateUsageStreamNotTrimmed", "TollgateJournalFailing", "TollgateUsageEventsOwed",
		"TollgateMeterDown", "TollgateDeadLettersNotDelivered", "TollgateProviderFailing", "TollgateLateEvents",
		"TollgateUsageEstimated", "TollgateDeploymentResting", "TollgateDatabaseDown", "TollgateDown",
		"TollgateCrashEstimatesHeld"} {
		if !alerts[want] {
			t.Errorf("alerts.yml has no %s", want)
		}
	}
}

// TestPromtool validates alerts.yml with promtool (Debian's prometheus
// package; .ci/run installs it), runs the rules' unit tests in
// testdata/alerts_test.yml, and checks deploy/prometheus.yml as an operator
// would before deploying it (`promtool check config`, which loads its
// rule_files: a path that resolves only inside the container, such as
// /etc/prometheus/alerts.yml, fails there). Under CI it fails when promtool
// is missing.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("promtool is not installed (apt-get install prometheus): %v", err)
		}
		t.Skip("promtool is not installed: apt-get install prometheus to check alerts.yml (under CI=true this fails)")
	}
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", filepath.Join("testdata", "alerts_test.yml")},
		{"check", "config", filepath.Join(repo, "deploy", "prometheus.yml")},
	} {
		out, err := exec.CommandContext(t.Context(), promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertRowRE matches a row of the alerts table in docs/operations.md:
// | `TollgateX` | severity | fires when | what to do |.
var alertRowRE = regexp.MustCompile("(?m)^\\| `(Tollgate\\w+)` \\|(.*)$")

// TestAlertRunbook checks that every alert of alerts.yml has its row in
// the runbook (docs/operations.md, "Alerts"), and that the row names a
// metric the rule reads: the operator paged looks the alert up there, and
// goes from it to the series on the dashboard or /metrics.
func TestAlertRunbook(t *testing.T) {
	var rules alertRules
	readYAML(t, "dashboards/alerts.yml", &rules, false)
	doc, err := os.ReadFile(filepath.Join(repo, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range alertRowRE.FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] += m[2]
	}
	c := newChecker(t)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			row, ok := rows[r.Alert]
			if !ok {
				t.Errorf("%s has no row in docs/operations.md's alerts table", r.Alert)
				continue
			}
			used, err := c.check(r.Expr, nil)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			if !slices.ContainsFunc(used, func(m string) bool {
				return strings.Contains(row, "`"+strings.TrimSuffix(m, "_bucket")+"`")
			}) {
				t.Errorf("%s: its row in docs/operations.md names none of the metrics it reads, %v", r.Alert, used)
			}
		}
	}
}

// TestAlertTestSeries checks the series testdata/alerts_test.yml feeds the
// rules against the registry: each names a metric a Tollgate process
// serves, with exactly its labels and the scrape's (targetLabels), and
// values of closed labels it takes. A hand-written series that lacked a
// label (requests_total without status), or named a metric that is not
// served, would let a rule's unit test pass that fires on no real data.
func TestAlertTestSeries(t *testing.T) {
	var cases struct {
		Tests []struct {
			InputSeries []struct{ Series string } `yaml:"input_series"`
		}
	}
	readYAML(t, "dashboards/testdata/alerts_test.yml", &cases, false)
	c := newChecker(t)
	n := 0
	for _, tc := range cases.Tests {
		for _, in := range tc.InputSeries {
			n++
			if _, err := c.check(in.Series, nil); err != nil {
				t.Errorf("%s: %v", in.Series, err)
				continue
			}
			expr, _ := parser.NewParser(parser.Options{}).ParseExpr(in.Series) // c.check parsed it
			vs, ok := expr.(*parser.VectorSelector)
			if !ok {
				t.Errorf("%s: not a series", in.Series)
				continue
			}
			var name string
			var have []string
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName {
					name = m.Value
				} else {
					have = append(have, m.Name)
				}
			}
			want := append(slices.Clone(c.known[name]), targetLabels...)
			slices.Sort(want)
			slices.Sort(have)
			if !slices.Equal(have, want) {
				t.Errorf("%s: labels %v, want %v (the metric's and the scrape's)", in.Series, have, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("no input series read from testdata/alerts_test.yml")
	}
}
