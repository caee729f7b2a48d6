// Package metrics exports the metering pipeline's and the ledger's
// measurements as Prometheus series: tollgate_meter_* (a meter.Observer),
// tollgate_ledger_* (a ledger.Observer) and tollgate_database_up (a check
// cmd/tollgate runs at each scrape). The gateway registers its own
// tollgate_gateway_* series (gateway.Deps.Metrics).
//
// meter and ledger report only through their small Observer interfaces and
// never import this package; cmd/tollgate wires it. The series' names, help
// texts, types and labels are a contract: the dashboards and the alert rules
// in dashboards/ read them, and their tests check every query against the
// registry these constructors fill.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tollgate-dev/tollgate/meter"
)

// NewRegistry returns the registry every Tollgate process serves on
// /metrics, with the Go runtime's and the process's collectors registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// DeadLetterReasons are the reasons meter.Observer.DeadLetter is called
// with: the worker's "undecodable", "refused" and "max_deliver", and the
// durable publisher's "unpublishable". Each has its series from the start,
// at 0, so that the first dead letter shows as an increase.
var DeadLetterReasons = []string{"undecodable", "refused", "max_deliver", "unpublishable"}

// Meter exports the metering pipeline's measurements (meter.Observer) as
// tollgate_meter_* series.
type Meter struct {
	publish                            prometheus.Histogram
	publishFailed                      prometheus.Counter
	batchSize                          prometheus.Histogram
	write                              prometheus.Histogram
	written                            prometheus.Counter
	duplicates                         prometheus.Counter
	redeliveries                       prometheus.Counter
	deadLetters                        *prometheus.CounterVec
	pending                            prometheus.Gauge
	ackPending                         prometheus.Gauge
	sampled                            prometheus.Gauge
	trimFailures                       prometheus.Counter
	late                               prometheus.Counter
	estimatesHeld                      prometheus.Gauge
	reg                                prometheus.Registerer
	spoolCollected, deadSpoolCollected bool
}

var _ meter.Observer = (*Meter)(nil)

// NewMeter registers the meter's series with reg.
func NewMeter(reg prometheus.Registerer) *Meter {
	o := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "tollgate", Subsystem: "meter", Name: name, Help: help}
	}
	h := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "tollgate", Subsystem: "meter", Name: name, Help: help, Buckets: buckets})
	}
	secs := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	m := &Meter{
		publish:       h("publish_seconds", "Time to publish one usage event and get its PubAck.", secs),
		publishFailed: prometheus.NewCounter(prometheus.CounterOpts(o("publish_failures_total", "Publishes that failed or timed out (the event was spooled)."))),
		batchSize:     h("batch_size", "Events per ledger transaction.", prometheus.ExponentialBuckets(1, 2, 14)),
		write:         h("write_seconds", "Time to write one batch to the ledger (commit included).", secs),
		written:       prometheus.NewCounter(prometheus.CounterOpts(o("events_written_total", "Events stored in the ledger (new ones)."))),
		duplicates:    prometheus.NewCounter(prometheus.CounterOpts(o("duplicates_total", "Deliveries the ledger refused as already stored."))),
		redeliveries:  prometheus.NewCounter(prometheus.CounterOpts(o("redeliveries_total", "Messages delivered more than once to a worker."))),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts(o("dead_letters_total", "Messages set aside in the dead-letter stream, by reason.")),
			[]string{"reason"}),
		pending:    prometheus.NewGauge(prometheus.GaugeOpts(o("consumer_pending", "Events in the usage stream not yet delivered to a worker."))),
		ackPending: prometheus.NewGauge(prometheus.GaugeOpts(o("consumer_ack_pending", "Events delivered and not yet acknowledged."))),
		sampled: prometheus.NewGauge(prometheus.GaugeOpts(o("consumer_sampled_timestamp_seconds",
			"When the worker last read the consumer's backlog from NATS (Unix seconds): the two gauges above are as of then."))),
		trimFailures: prometheus.NewCounter(prometheus.CounterOpts(o("trim_failures_total",
			"Failed or refused trims of the usage stream below the meter's ack floor (the stream keeps its events meanwhile)."))),
		late: prometheus.NewCounter(prometheus.CounterOpts(o("late_events_total",
			"Usage events received more than an hour after the end of the UTC month they are dated in: each moved that month's statement."))),
		estimatesHeld: prometheus.NewGauge(prometheus.GaugeOpts(o("estimates_held",
			"Crash estimates the workers hold until the events stored before them are acknowledged (events)."))),
		reg: reg,
	}
	for _, r := range DeadLetterReasons {
		m.deadLetters.WithLabelValues(r)
	}
	reg.MustRegister(m.publish, m.publishFailed, m.batchSize, m.write, m.written, m.duplicates, m.redeliveries,
		m.deadLetters, m.trimFailures, m.late, m.estimatesHeld)
	return m
}

// CollectConsumer exposes the usage consumer's backlog
// (tollgate_meter_consumer_pending and _ack_pending, events), which a
// meter worker reads every 5 s, and when it last could
// (tollgate_meter_consumer_sampled_timestamp_seconds): a worker that
// cannot reach NATS keeps its last figures, and TollgateMeterDown reads
// their age. Only a process that runs a worker calls
// it: a gateway's or admin's constant 0 beside them kept max() at 0 when
// every worker was down, and TollgateMeterStalled silent; with no worker
// the series are absent, and TollgateMeterDown fires.
func (m *Meter) CollectConsumer() {
	m.reg.MustRegister(m.pending, m.ackPending, m.sampled)
}

// CollectSpool exposes the spool's depth and age; only the first call
// registers them.
func (m *Meter) CollectSpool(s *meter.Spool) {
	if m.spoolCollected {
		return
	}
	m.spoolCollected = true
	m.gauge("spool_events", "Usage events in the local spool, waiting for NATS.", func() float64 { n, _, _ := s.Stats(); return float64(n) })
	m.gauge("spool_bytes", "Bytes in the local spool.", func() float64 { _, b, _ := s.Stats(); return float64(b) })
	m.gauge("spool_oldest_seconds", "Age of the oldest spooled event (0 when empty).", func() float64 { _, _, a := s.Stats(); return a.Seconds() })
}

// CollectDeadSpool exposes the depth and age of the gateway's dead-letter
// spool (TOLLGATE_DATA_DIR/spool-dead): dead letters the gateway set aside
// (an event NATS refuses for good) that the dead-letter stream
// (TOLLGATE_USAGE_DLQ) has not taken yet. Such an event is in neither the
// ledger nor `tollgate dlq list` until it does; only the first call
// registers the gauges.
func (m *Meter) CollectDeadSpool(s *meter.Spool) {
	if m.deadSpoolCollected {
		return
	}
	m.deadSpoolCollected = true
	m.gauge("dead_spool_events", "Dead letters in the gateway's local dead-letter spool, waiting for the dead-letter stream.",
		func() float64 { n, _, _ := s.Stats(); return float64(n) })
	m.gauge("dead_spool_oldest_seconds", "Age of the oldest dead letter in the local dead-letter spool (0 when empty).",
		func() float64 { _, _, a := s.Stats(); return a.Seconds() })
}

// gauge registers tollgate_meter_<name>, read from f at each scrape.
func (m *Meter) gauge(name, help string, f func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tollgate", Subsystem: "meter", Name: name, Help: help}, f))
}

// CollectJournal exposes whether the gateway's crash journal cannot write
// (tollgate_gateway_journal_failing, 1 while its writes fail, 0 otherwise):
// the gateway refuses new requests with 503 meanwhile.
func (m *Meter) CollectJournal(j interface{ Failing() error }) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tollgate", Subsystem: "gateway",
		Name: "journal_failing",
		Help: "1 while the crash journal's writes fail (a full disk): new requests are refused with 503; 0 otherwise."},
		func() float64 {
			if j.Failing() != nil {
				return 1
			}
			return 0
		}))
}

// CollectEmbedded exposes how many times the embedded NATS server
// restarted after one of its stores stopped taking writes
// (tollgate_meter_embedded_nats_restarts_total; see meter.Embedded).
func (m *Meter) CollectEmbedded(e *meter.Embedded) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "tollgate", Subsystem: "meter",
		Name: "embedded_nats_restarts_total",
		Help: "Restarts of the embedded NATS server after a JetStream store stopped taking writes."},
		func() float64 { return float64(e.Restarts()) }))
}

// Published implements meter.Observer.
func (m *Meter) Published(took time.Duration, err error) {
	if err != nil {
		m.publishFailed.Inc()
		return
	}
	m.publish.Observe(took.Seconds())
}

// BatchWritten implements meter.Observer.
func (m *Meter) BatchWritten(events, stored int, took time.Duration) {
	m.batchSize.Observe(float64(events))
	m.write.Observe(took.Seconds())
	m.written.Add(float64(stored))
	m.duplicates.Add(float64(events - stored))
}

// DeadLetter implements meter.Observer.
func (m *Meter) DeadLetter(reason string) { m.deadLetters.WithLabelValues(reason).Inc() }

// Redelivered implements meter.Observer.
func (m *Meter) Redelivered() { m.redeliveries.Inc() }

// ConsumerPending implements meter.Observer.
func (m *Meter) ConsumerPending(pending, ackPending uint64) {
	m.pending.Set(float64(pending))
	m.ackPending.Set(float64(ackPending))
	m.sampled.SetToCurrentTime()
}

// TrimFailed implements meter.Observer.
func (m *Meter) TrimFailed() { m.trimFailures.Inc() }

// LateEvent implements meter.Observer.
func (m *Meter) LateEvent() { m.late.Inc() }

// EstimatesHeld implements meter.Observer.
func (m *Meter) EstimatesHeld(change int) { m.estimatesHeld.Add(float64(change)) }
