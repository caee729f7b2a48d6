package dashboards

// PromQL expressions, the dashboards' and the alert rules', are parsed by
// Prometheus' own parser and checked against the registry a Tollgate
// process serves (registry_test.go): every metric exists, every label it is
// matched or grouped on is one of its labels, and the labels that take a
// closed set of values are matched only on those values.

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tollgate-dev/tollgate/dashboards/metrics"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// targetLabels are added by Prometheus (deploy/prometheus.yml) to every series.
var targetLabels = []string{"job", "instance", "role"}

// closedValues are the labels that take a closed set of values: the usage
// event's statuses and sources, the dead-letter reasons (whose series the
// registry holds from the start), and the gateway's token classes, stream
// flags and upstream error kinds (gateway/metrics.go).
func closedValues(t *testing.T, known exposed) map[string][]string {
	t.Helper()
	var statuses, sources []string
	for _, s := range []usage.Status{usage.StatusOK, usage.StatusUpstreamError, usage.StatusClientCancelled,
		usage.StatusTimeout, usage.StatusCutOff, usage.StatusCrashed} {
		statuses = append(statuses, string(s))
	}
	for _, s := range []usage.Source{usage.SourceUpstream, usage.SourcePartial, usage.SourceEstimated} {
		sources = append(sources, string(s))
	}
	if !slices.Contains(known["tollgate_meter_dead_letters_total"], "reason") {
		t.Fatal("the registry has no tollgate_meter_dead_letters_total{reason}")
	}
	return map[string][]string{
		"status": statuses,
		"source": sources,
		"reason": metrics.DeadLetterReasons,
		"class":  {"prompt", "cached", "cache_write", "completion", "reasoning"},
		"stream": {"true", "false"},
		"kind":   {"timeout", "refused", "invalid_request", "unreachable", "stream_error"},
	}
}

// checker checks PromQL against the registry.
type checker struct {
	known  exposed
	closed map[string][]string
}

func newChecker(t *testing.T) *checker {
	known := maps.Clone(registeredMetrics(t))
	// Prometheus' own series of each scrape (1: the target answered),
	// with the target's labels alone: TollgateDown reads it.
	known["up"] = nil
	return &checker{known: known, closed: closedValues(t, known)}
}

var wordRE = regexp.MustCompile(`^\w+$`)

// check parses expr, with Grafana's $__rate_interval, $__interval and
// $__range and the given template variables substituted, and returns the
// metrics it uses.
func (c *checker) check(expr string, vars map[string]string) ([]string, error) {
	for _, v := range []string{"$__rate_interval", "$__interval", "$__range"} {
		expr = strings.ReplaceAll(expr, v, "5m")
	}
	for name, val := range vars {
		expr = strings.ReplaceAll(strings.ReplaceAll(expr, "${"+name+"}", val), "$"+name, val)
	}
	if i := strings.IndexByte(expr, '$'); i >= 0 {
		return nil, fmt.Errorf("unknown variable at %q", expr[i:])
	}
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var used, grouped []string
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			if e := c.selector(n); e != nil && err == nil {
				err = e
			}
			used = append(used, n.Name)
		case *parser.AggregateExpr:
			grouped = append(grouped, n.Grouping...)
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil {
				grouped = append(grouped, vm.MatchingLabels...)
				grouped = append(grouped, vm.Include...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(used) == 0 {
		return nil, fmt.Errorf("uses no metric")
	}
	slices.Sort(used)
	used = slices.Compact(used)
	for _, l := range grouped {
		if !slices.Contains(targetLabels, l) && !slices.ContainsFunc(used, func(m string) bool { return slices.Contains(c.known[m], l) }) {
			return nil, fmt.Errorf("groups by %q, a label none of %v has", l, used)
		}
	}
	return used, nil
}

// selector checks one vector selector: its metric, its labels and their values.
func (c *checker) selector(vs *parser.VectorSelector) error {
	if vs.Name == "" {
		return fmt.Errorf("selector %s names no metric", vs)
	}
	have, ok := c.known[vs.Name]
	if !ok {
		return fmt.Errorf("unknown metric %s", vs.Name)
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName {
			continue
		}
		if !slices.Contains(have, m.Name) && !slices.Contains(targetLabels, m.Name) {
			return fmt.Errorf("%s has no label %q (it has %v)", vs.Name, m.Name, have)
		}
		allowed := c.closed[m.Name]
		if allowed == nil {
			continue
		}
		values := []string{m.Value}
		if m.Type == labels.MatchRegexp || m.Type == labels.MatchNotRegexp {
			values = strings.Split(m.Value, "|")
		}
		for _, v := range values {
			if wordRE.MatchString(v) && !slices.Contains(allowed, v) {
				return fmt.Errorf("label %s has no value %q (it takes %v)", m.Name, v, allowed)
			}
		}
	}
	return nil
}

var labelValuesRE = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_]\w*)\s*\)$`)

// checkLabelValues checks a Grafana label_values(metric, label) query.
func (c *checker) checkLabelValues(q string) error {
	m := labelValuesRE.FindStringSubmatch(q)
	if m == nil {
		return fmt.Errorf("want label_values(metric, label)")
	}
	if labels, ok := c.known[m[1]]; !ok || !slices.Contains(labels, m[2]) {
		return fmt.Errorf("%s has no label %s", m[1], m[2])
	}
	return nil
}

// TestPrometheusQueries checks every PromQL expression of the dashboards:
// it parses, and uses only Tollgate's metrics with their labels and label
// values.
func TestPrometheusQueries(t *testing.T) {
	c := newChecker(t)
	n := 0
	for _, d := range loadDashboards(t) {
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = ".*"
		}
		for _, q := range d.queries() {
			if q.uid != "prometheus" {
				continue
			}
			n++
			var err error
			if strings.HasPrefix(q.text, "label_values(") {
				err = c.checkLabelValues(q.text)
			} else {
				_, err = c.check(q.text, vars)
			}
			if err != nil {
				t.Errorf("%s: %v\n\t%s", q.where, err, q.text)
			}
		}
	}
	if n == 0 {
		t.Error("no Prometheus queries found")
	}
}

// TestPromQLChecker checks the checker itself.
func TestPromQLChecker(t *testing.T) {
	c := newChecker(t)
	good := []string{
		`sum by (status) (rate(tollgate_gateway_requests_total{model=~"$model"}[$__rate_interval]))`,
		`histogram_quantile(0.99, sum by (le, stream) (rate(tollgate_gateway_duration_seconds_bucket[5m])))`,
		`sum(rate(tollgate_gateway_tokens_total{class="cached"}[5m])) / sum(rate(tollgate_gateway_tokens_total{class="prompt"}[5m]))`,
		`sum(increase(tollgate_meter_dead_letters_total{reason="unpublishable"}[$__range])) > bool 0`,
		`sum by (source) (rate(tollgate_gateway_usage_source_total[5m])) / ignoring(source) group_left sum(rate(tollgate_gateway_usage_source_total[5m]))`,
		`max(tollgate_meter_spool_oldest_seconds offset 1h) * 2`,
		`max_over_time(sum(tollgate_gateway_in_flight)[1h:1m])`,
		`topk(5, sum by (model) (rate(tollgate_gateway_requests_total{status!="ok"}[5m])))`,
		`sum(rate(tollgate_meter_write_seconds_sum[5m])) / sum(rate(tollgate_meter_write_seconds_count[5m]))`,
		`sum by (instance) (rate(tollgate_gateway_requests_total{status="crashed", role="gateway"}[5m]))`,
		`process_resident_memory_bytes{role="meter"}`,
	}
	for _, e := range good {
		if _, err := c.check(e, map[string]string{"model": ".*"}); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
	bad := map[string]string{
		`sum(rate(tollgate_gateway_request_total[5m]))`:                         "unknown metric",
		`sum(rate(tollgate_gateway_duration_seconds[5m]))`:                      "unknown metric",
		`sum(rate(tollgate_gateway_requests_total{modle="x"}[5m]))`:             "no label",
		`sum(rate(tollgate_gateway_requests_total{status="error"}[5m]))`:        "no value",
		`sum(rate(tollgate_meter_dead_letters_total{reason=~"refused|x"}[5m]))`: "no value",
		`sum by (reason) (rate(tollgate_gateway_requests_total[5m]))`:           "groups by",
		`sum(rate(tollgate_gateway_requests_total[5m])`:                         "unclosed",
		`rate(tollgate_gateway_requests_total)`:                                 "expected type range vector",
		`clamp_min(tollgate_gateway_in_flight)`:                                 "expected 2 argument",
		`sum(tollgate_gateway_requests_total[5m])`:                              "expected type instant vector",
		`sum(rate(tollgate_gateway_requests_total[$window]))`:                   "unknown variable",
		`1 + 2`:         "no metric",
		`frobnicate(1)`: "unknown function",
		`{status="ok"}`: "names no metric",
	}
	for e, want := range bad {
		_, err := c.check(e, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got error %v, want one containing %q", e, err, want)
		}
	}
	if err := c.checkLabelValues(`label_values(tollgate_gateway_requests_total, model)`); err != nil {
		t.Error(err)
	}
	if err := c.checkLabelValues(`label_values(tollgate_meter_spool_events, model)`); err == nil {
		t.Error("label_values of a label the metric lacks passed")
	}
}
