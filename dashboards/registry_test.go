package dashboards

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate-dev/tollgate/dashboards/metrics"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The metrics the queries may use are read from the registry a Tollgate
// process serves on /metrics, built as cmd/tollgate builds it: the Go and
// process collectors, the gateway's own series (gateway.New with
// Deps.Metrics), and the meter's, the spool's and the ledger's adapters
// (dashboards/metrics). A recording Registerer keeps the Descs every
// collector describes, so that vectors without a series yet count too.

// exposed is every series name the registry can expose (a histogram's
// _bucket, _sum and _count) with its label names.
type exposed map[string][]string

// recorder registers with a real registry and keeps what it was given.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

type noKeys struct{}

func (noKeys) LookupKey(string) (usage.KeyState, bool) { return usage.KeyState{}, false }

type noSink struct{}

func (noSink) Publish(context.Context, *usage.Event) error { return nil }

var (
	registryOnce sync.Once
	registryErr  error
	registryMF   exposed
)

// registeredMetrics builds the registry once per test binary and returns
// what it exposes.
func registeredMetrics(t *testing.T) exposed {
	t.Helper()
	registryOnce.Do(func() { registryMF, registryErr = buildRegistry(t.TempDir()) })
	if registryErr != nil {
		t.Fatal(registryErr)
	}
	return registryMF
}

func buildRegistry(dir string) (exposed, error) {
	reg := metrics.NewRegistry()
	rec := &recorder{Registerer: reg}
	cfg := gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: "http://127.0.0.1:9/v1", APIKey: "x"}},
		Models:    []gateway.ModelConfig{{Name: "sim-pro", Provider: "sim"}},
	}
	if _, err := gateway.New(cfg, gateway.Deps{Providers: []provider.Provider{openai.Provider()}, Keys: noKeys{},
		Sink: noSink{}, Metrics: rec}); err != nil {
		return nil, err
	}
	spool, err := meter.OpenSpool(dir, 0)
	if err != nil {
		return nil, err
	}
	defer spool.Close()
	mm := metrics.NewMeter(rec)
	mm.CollectConsumer()
	mm.CollectSpool(spool)
	mm.CollectDeadSpool(spool)
	j, _, err := journal.Open(filepath.Join(dir, "journal"))
	if err != nil {
		return nil, err
	}
	defer j.Close()
	mm.CollectJournal(j)
	ns, err := meter.StartEmbedded(filepath.Join(dir, "nats"), "", meter.SyncPolicy{}, nil)
	if err != nil {
		return nil, err
	}
	defer ns.Shutdown()
	mm.CollectEmbedded(ns)
	metrics.NewLedger(rec)
	metrics.CollectDatabase(rec, func() bool { return true })

	// Types: from the series gathered (the Go and process collectors', and
	// every metric without labels), else from the vector's Go type.
	types := map[string]dto.MetricType{}
	out := exposed{}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType()
		if len(mf.GetMetric()) > 0 {
			var labels []string
			for _, l := range mf.GetMetric()[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
			out.add(mf.GetName(), mf.GetType(), labels)
		}
	}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			name, labels, err := parseDesc(d)
			if err != nil {
				return nil, err
			}
			typ, ok := types[name]
			if !ok {
				switch c.(type) {
				case *prometheus.CounterVec:
					typ = dto.MetricType_COUNTER
				case *prometheus.GaugeVec:
					typ = dto.MetricType_GAUGE
				case *prometheus.HistogramVec:
					typ = dto.MetricType_HISTOGRAM
				case *prometheus.SummaryVec:
					typ = dto.MetricType_SUMMARY
				default:
					return nil, &descError{d.String(), "no series and a collector of unknown type"}
				}
			}
			out.add(name, typ, labels)
		}
	}
	return out, nil
}

// add records the series names a metric of type typ exposes.
func (e exposed) add(name string, typ dto.MetricType, labels []string) {
	labels = slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return l == "le" || l == "quantile" })
	switch typ {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		e[name+"_bucket"] = append(slices.Clone(labels), "le")
		e[name+"_sum"], e[name+"_count"] = labels, labels
	case dto.MetricType_SUMMARY:
		e[name] = append(slices.Clone(labels), "quantile")
		e[name+"_sum"], e[name+"_count"] = labels, labels
	default:
		e[name] = labels
	}
}

type descError struct{ desc, why string }

func (e *descError) Error() string { return e.desc + ": " + e.why }

// descRE reads prometheus.Desc's String(): fqName, help, unit, constLabels
// {k="v",…}, variableLabels {a,b,c(constrained)}.
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: "(?:[^"\\]|\\.)*", unit: "(?:[^"\\]|\\.)*", ` +
	`constLabels: \{((?:[a-zA-Z_]\w*="(?:[^"\\]|\\.)*",?)*)\}, variableLabels: \{([\w,()]*)\}\}$`)

func parseDesc(d *prometheus.Desc) (string, []string, error) {
	m := descRE.FindStringSubmatch(d.String())
	if m == nil {
		return "", nil, &descError{d.String(), "not understood"}
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		return "", nil, err
	}
	var labels []string
	for _, kv := range regexp.MustCompile(`([a-zA-Z_]\w*)="`).FindAllStringSubmatch(m[2], -1) {
		labels = append(labels, kv[1])
	}
	for _, l := range strings.Split(m[3], ",") {
		if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
			labels = append(labels, l)
		}
	}
	return name, labels, nil
}

// TestRegistry checks the registry reader: the gateway's vectors, which
// have no series yet, are there with their labels, histograms expose
// their buckets, and the adapters' series are there.
func TestRegistry(t *testing.T) {
	got := registeredMetrics(t)
	want := map[string][]string{
		"tollgate_gateway_requests_total":          {"endpoint", "provider", "model", "status"},
		"tollgate_gateway_duration_seconds_bucket": {"provider", "model", "stream", "le"},
		"tollgate_gateway_duration_seconds_count":  {"provider", "model", "stream"},
		"tollgate_gateway_in_flight":               {},
		"tollgate_meter_publish_seconds_bucket":    {"le"},
		"tollgate_meter_dead_letters_total":        {"reason"},
		"tollgate_meter_spool_oldest_seconds":      {},
		"tollgate_meter_dead_spool_oldest_seconds": {},
		"tollgate_gateway_journal_failing":         {},
		"tollgate_ledger_unpriced_events_total":    {},
		"process_resident_memory_bytes":            {},
	}
	for name, labels := range want {
		l, ok := got[name]
		if !ok {
			t.Errorf("%s is not registered", name)
			continue
		}
		if !slices.Equal(slices.Sorted(slices.Values(l)), slices.Sorted(slices.Values(labels))) {
			t.Errorf("%s: labels %v, want %v", name, l, labels)
		}
	}
	if _, ok := got["tollgate_gateway_duration_seconds"]; ok {
		t.Error("a histogram's own name is not a series")
	}
}
