package dashboards

// A small PromQL checker. github.com/prometheus/prometheus/promql/parser
// pulls the TSDB and an unfetchable module version into `go mod tidy`, so
// this parses the subset of PromQL that dashboards use (selectors, range
// and subquery brackets, offset, functions, aggregations with by/without,
// binary operators with bool/on/ignoring/group_left/group_right) and checks
// names against the metrics Tollgate exports.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// metricLabels is every metric Tollgate exports, with its labels.
var metricLabels = map[string][]string{
	"tollgate_gateway_requests_total":          {"endpoint", "provider", "model", "status"},
	"tollgate_gateway_responses_total":         {"endpoint", "code"},
	"tollgate_gateway_tokens_total":            {"provider", "model", "class"},
	"tollgate_gateway_ttft_seconds_bucket":     {"provider", "model", "le"},
	"tollgate_gateway_duration_seconds_bucket": {"provider", "model", "stream", "le"},
	"tollgate_gateway_upstream_errors_total":   {"provider", "kind"},
	"tollgate_gateway_usage_source_total":      {"source"},
	"tollgate_gateway_in_flight":               {},
	"tollgate_meter_publish_seconds_bucket":    {"le"},
	"tollgate_meter_publish_failures_total":    {},
	"tollgate_meter_spool_events":              {},
	"tollgate_meter_spool_bytes":               {},
	"tollgate_meter_spool_oldest_seconds":      {},
	"tollgate_meter_consumer_pending":          {},
	"tollgate_meter_consumer_ack_pending":      {},
	"tollgate_meter_redeliveries_total":        {},
	"tollgate_meter_batch_size_bucket":         {"le"},
	"tollgate_meter_write_seconds_bucket":      {"le"},
	"tollgate_meter_events_written_total":      {},
	"tollgate_meter_duplicates_total":          {},
	"tollgate_meter_dead_letters_total":        {"reason"},
	"tollgate_ledger_unpriced_events_total":    {},
	"tollgate_ledger_rating_errors_total":      {},
}

// targetLabels are added by Prometheus (deploy/prometheus.yml) to every series.
var targetLabels = []string{"job", "instance", "role"}

// labelValues are the closed sets of values some labels take.
var labelValues = map[string][]string{
	"status": {"ok", "upstream_error", "client_cancelled", "timeout", "cut_off"},
	"class":  {"prompt", "cached", "cache_write", "completion", "reasoning"},
	"source": {"upstream", "partial", "estimated"},
	"stream": {"true", "false"},
}

var aggregations = map[string]bool{"sum": true, "avg": true, "min": true, "max": true, "count": true,
	"group": true, "stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true}

// functions maps a function to its arguments' types: v instant vector,
// m range vector, s scalar, t string; a trailing "?" makes the rest optional.
var functions = map[string]string{
	"rate": "m", "irate": "m", "increase": "m", "delta": "m", "idelta": "m", "deriv": "m", "changes": "m", "resets": "m",
	"avg_over_time": "m", "max_over_time": "m", "min_over_time": "m", "sum_over_time": "m", "count_over_time": "m",
	"last_over_time": "m", "quantile_over_time": "sm", "histogram_quantile": "sv", "abs": "v", "ceil": "v",
	"floor": "v", "round": "v?s", "clamp": "vss", "clamp_min": "vs", "clamp_max": "vs", "absent": "v", "scalar": "v",
	"vector": "s", "time": "", "timestamp": "v", "sort": "v", "sort_desc": "v", "sqrt": "v", "ln": "v", "log10": "v",
	"label_replace": "vtttt", "label_join": "vttt?tttttt",
}

type ptype byte // 'v' instant vector, 'm' range vector, 's' scalar, 't' string

type pqParser struct {
	toks    []string
	pos     int
	metrics map[string]bool
	grouped []string // labels named in by/without/on/ignoring/group_*
}

var tokenRE = regexp.MustCompile(`^(?:\s+|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`" +
	`|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?(?:ms|[smhdwy])?(?:[0-9]+(?:ms|[smhdwy]))*|[a-zA-Z_][a-zA-Z0-9_:]*|==|!=|=~|!~|<=|>=|[-+*/%^<>=(){}\[\],:])`)

var (
	durationRE = regexp.MustCompile(`^(?:[0-9]+(?:ms|[smhdwy]))+$`)
	wordRE     = regexp.MustCompile(`^\w+$`)
)

// checkPromQL parses expr, with Grafana's $__rate_interval, $__interval and
// $__range and the given template variables substituted, and returns the
// metrics it uses.
func checkPromQL(expr string, vars map[string]string) ([]string, error) {
	for _, v := range []string{"$__rate_interval", "$__interval", "$__range"} {
		expr = strings.ReplaceAll(expr, v, "5m")
	}
	for name, val := range vars {
		expr = strings.ReplaceAll(strings.ReplaceAll(expr, "${"+name+"}", val), "$"+name, val)
	}
	if i := strings.IndexByte(expr, '$'); i >= 0 {
		return nil, fmt.Errorf("unknown variable at %q", expr[i:])
	}
	p := &pqParser{metrics: map[string]bool{}}
	for rest := expr; rest != ""; {
		m := tokenRE.FindString(rest)
		if m == "" {
			return nil, fmt.Errorf("unexpected character at %q", rest)
		}
		if strings.TrimSpace(m) != "" {
			p.toks = append(p.toks, m)
		}
		rest = rest[len(m):]
	}
	if _, err := p.expr(); err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q after the expression", p.toks[p.pos])
	}
	if len(p.metrics) == 0 {
		return nil, fmt.Errorf("uses no metric")
	}
	allowed := map[string]bool{}
	var names []string
	for m := range p.metrics {
		names = append(names, m)
		for _, l := range metricLabels[m] {
			allowed[l] = true
		}
	}
	for _, l := range p.grouped {
		if !allowed[l] && !contains(targetLabels, l) {
			return nil, fmt.Errorf("groups by %q, a label none of %v has", l, names)
		}
	}
	return names, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *pqParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *pqParser) next() string { t := p.peek(); p.pos++; return t }

func (p *pqParser) expect(tok string) error {
	if got := p.next(); got != tok {
		return fmt.Errorf("want %q, got %q", tok, got)
	}
	return nil
}

func isIdent(t string) bool {
	return t != "" && (t[0] == '_' || t[0] == ':' || t[0] >= 'a' && t[0] <= 'z' || t[0] >= 'A' && t[0] <= 'Z')
}

var binops = map[string]bool{"+": true, "-": true, "*": true, "/": true, "%": true, "^": true, "==": true, "!=": true,
	"<": true, ">": true, "<=": true, ">=": true, "and": true, "or": true, "unless": true}

func (p *pqParser) expr() (ptype, error) {
	left, err := p.unary()
	for err == nil && binops[p.peek()] {
		op := p.next()
		if p.peek() == "bool" {
			p.next()
		}
		if k := p.peek(); k == "on" || k == "ignoring" {
			p.next()
			if err := p.labelList(); err != nil {
				return 0, err
			}
			if k := p.peek(); k == "group_left" || k == "group_right" {
				p.next()
				if p.peek() == "(" {
					if err := p.labelList(); err != nil {
						return 0, err
					}
				}
			}
		}
		var right ptype
		if right, err = p.unary(); err != nil {
			break
		}
		if left == 'm' || right == 'm' || left == 't' || right == 't' {
			return 0, fmt.Errorf("operator %s on a range vector or string", op)
		}
		if right == 'v' {
			left = 'v'
		}
	}
	return left, err
}

func (p *pqParser) unary() (ptype, error) {
	if t := p.peek(); t == "-" || t == "+" {
		p.next()
		return p.unary()
	}
	typ, err := p.primary()
	for err == nil {
		switch p.peek() {
		case "[":
			p.next()
			if d := p.next(); !durationRE.MatchString(d) {
				return 0, fmt.Errorf("bad range duration %q", d)
			}
			subquery := p.peek() == ":"
			if subquery {
				p.next()
				if durationRE.MatchString(p.peek()) {
					p.next()
				}
			}
			if err := p.expect("]"); err != nil {
				return 0, err
			}
			if typ != 'v' || (!subquery && p.toks[p.pos-4] != "}" && !isIdent(p.toks[p.pos-4])) {
				return 0, fmt.Errorf("a range needs a vector selector (or a subquery)")
			}
			typ = 'm'
		case "offset":
			p.next()
			if d := p.next(); !durationRE.MatchString(strings.TrimPrefix(d, "-")) {
				return 0, fmt.Errorf("bad offset %q", d)
			}
		default:
			return typ, nil
		}
	}
	return typ, err
}

func (p *pqParser) primary() (ptype, error) {
	t := p.next()
	switch {
	case t == "":
		return 0, fmt.Errorf("unexpected end of expression")
	case t == "(":
		typ, err := p.expr()
		if err == nil {
			err = p.expect(")")
		}
		return typ, err
	case t[0] == '"' || t[0] == '\'' || t[0] == '`':
		return 't', nil
	case t[0] >= '0' && t[0] <= '9' || t[0] == '.':
		if _, err := strconv.ParseFloat(t, 64); err != nil {
			return 0, fmt.Errorf("bad number %q", t)
		}
		return 's', nil
	case t == "{":
		return 'v', p.matchers("")
	case !isIdent(t):
		return 0, fmt.Errorf("unexpected %q", t)
	case aggregations[t]:
		return p.aggregation(t)
	case p.peek() == "(" && functions[t] != "" || t == "time":
		return p.call(t)
	case p.peek() == "(":
		return 0, fmt.Errorf("unknown function %s", t)
	}
	if _, ok := metricLabels[t]; !ok {
		return 0, fmt.Errorf("unknown metric %s", t)
	}
	p.metrics[t] = true
	if p.peek() == "{" {
		p.next()
		return 'v', p.matchers(t)
	}
	return 'v', nil
}

// matchers parses label matchers after "{" through "}".
func (p *pqParser) matchers(metric string) error {
	for p.peek() != "}" {
		label, op, val := p.next(), p.next(), p.next()
		if !isIdent(label) || (op != "=" && op != "!=" && op != "=~" && op != "!~") || val == "" || val[0] != '"' {
			return fmt.Errorf("bad label matcher %s%s%s", label, op, val)
		}
		if metric != "" && !contains(metricLabels[metric], label) && !contains(targetLabels, label) {
			return fmt.Errorf("%s has no label %q", metric, label)
		}
		if allowed := labelValues[label]; allowed != nil {
			s, err := strconv.Unquote(val)
			if err != nil {
				return err
			}
			values := []string{s}
			if op == "=~" || op == "!~" {
				values = strings.Split(s, "|")
			}
			for _, v := range values {
				if wordRE.MatchString(v) && !contains(allowed, v) {
					return fmt.Errorf("label %s has no value %q (it takes %v)", label, v, allowed)
				}
			}
		}
		if p.peek() == "," {
			p.next()
		}
	}
	p.next()
	return nil
}

func (p *pqParser) labelList() error {
	if err := p.expect("("); err != nil {
		return err
	}
	for p.peek() != ")" {
		l := p.next()
		if !isIdent(l) {
			return fmt.Errorf("bad label %q in a grouping", l)
		}
		p.grouped = append(p.grouped, l)
		if p.peek() == "," {
			p.next()
		}
	}
	p.next()
	return nil
}

func (p *pqParser) aggregation(name string) (ptype, error) {
	grouping := func() error {
		if k := p.peek(); k == "by" || k == "without" {
			p.next()
			return p.labelList()
		}
		return nil
	}
	if err := grouping(); err != nil {
		return 0, err
	}
	if err := p.expect("("); err != nil {
		return 0, err
	}
	if name == "topk" || name == "bottomk" || name == "quantile" || name == "count_values" {
		if _, err := p.expr(); err != nil {
			return 0, err
		}
		if err := p.expect(","); err != nil {
			return 0, err
		}
	}
	typ, err := p.expr()
	if err != nil {
		return 0, err
	}
	if typ != 'v' {
		return 0, fmt.Errorf("%s needs an instant vector", name)
	}
	if err := p.expect(")"); err != nil {
		return 0, err
	}
	return 'v', grouping()
}

func (p *pqParser) call(name string) (ptype, error) {
	if err := p.expect("("); err != nil {
		return 0, err
	}
	var args []ptype
	for p.peek() != ")" {
		if len(args) > 0 {
			if err := p.expect(","); err != nil {
				return 0, err
			}
		}
		typ, err := p.expr()
		if err != nil {
			return 0, err
		}
		args = append(args, typ)
	}
	p.next()
	req, opt, _ := strings.Cut(functions[name], "?")
	if len(args) < len(req) || len(args) > len(req)+len(opt) {
		return 0, fmt.Errorf("%s: %d arguments, want %d to %d", name, len(args), len(req), len(req)+len(opt))
	}
	for i, a := range args {
		if ptype((req + opt)[i]) != a {
			return 0, fmt.Errorf("%s: argument %d has the wrong type (%c, signature %s)", name, i+1, a, functions[name])
		}
	}
	return 'v', nil
}

// checkLabelValues checks a Grafana label_values(metric, label) query.
func checkLabelValues(q string) error {
	m := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_]\w*)\s*\)$`).FindStringSubmatch(q)
	if m == nil {
		return fmt.Errorf("want label_values(metric, label)")
	}
	if labels, ok := metricLabels[m[1]]; !ok || !contains(labels, m[2]) {
		return fmt.Errorf("%s has no label %s", m[1], m[2])
	}
	return nil
}

// TestPromQLChecker checks the checker itself.
func TestPromQLChecker(t *testing.T) {
	good := []string{
		`sum by (status) (rate(tollgate_gateway_requests_total{model=~"$model"}[$__rate_interval]))`,
		`histogram_quantile(0.99, sum by (le, stream) (rate(tollgate_gateway_duration_seconds_bucket[5m])))`,
		`sum(rate(tollgate_gateway_tokens_total{class="cached"}[5m])) / sum(rate(tollgate_gateway_tokens_total{class="prompt"}[5m]))`,
		`sum(increase(tollgate_meter_dead_letters_total[$__range])) > bool 0`,
		`sum by (source) (rate(tollgate_gateway_usage_source_total[5m])) / ignoring(source) group_left sum(rate(tollgate_gateway_usage_source_total[5m]))`,
		`max(tollgate_meter_spool_oldest_seconds offset 1h) * 2`,
		`max_over_time(sum(tollgate_gateway_in_flight)[1h:1m])`,
		`topk(5, sum by (model) (rate(tollgate_gateway_requests_total{status!="ok"}[5m])))`,
	}
	for _, e := range good {
		if _, err := checkPromQL(e, map[string]string{"model": ".*"}); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
	bad := map[string]string{
		`sum(rate(tollgate_gateway_request_total[5m]))`:                  "unknown metric",
		`sum(rate(tollgate_gateway_requests_total{modle="x"}[5m]))`:      "no label",
		`sum(rate(tollgate_gateway_requests_total{status="error"}[5m]))`: "no value",
		`sum by (reason) (rate(tollgate_gateway_requests_total[5m]))`:    "groups by",
		`sum(rate(tollgate_gateway_requests_total[5m])`:                  "want",
		`rate(tollgate_gateway_requests_total)`:                          "wrong type",
		`clamp_min(tollgate_gateway_in_flight)`:                          "arguments",
		`sum(tollgate_gateway_requests_total[5m])`:                       "instant vector",
		`sum(rate(tollgate_gateway_requests_total[5x]))`:                 "duration",
		`sum(rate(tollgate_gateway_requests_total[$window]))`:            "unknown variable",
		`histogram_quantile(sum(tollgate_meter_batch_size_bucket), 0.5)`: "wrong type",
		`1 + 2`:         "no metric",
		`frobnicate(1)`: "unknown function",
		`tollgate_gateway_in_flight tollgate_gateway_in_flight`: "after the expression",
	}
	for e, want := range bad {
		_, err := checkPromQL(e, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got error %v, want one containing %q", e, err, want)
		}
	}
}
