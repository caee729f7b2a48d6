package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/meter"
)

// meterMetrics exports the metering pipeline's measurements (meter.Observer)
// as tollgate_meter_* series.
type meterMetrics struct {
	publish        prometheus.Histogram
	publishFailed  prometheus.Counter
	batchSize      prometheus.Histogram
	write          prometheus.Histogram
	written        prometheus.Counter
	duplicates     prometheus.Counter
	redeliveries   prometheus.Counter
	deadLetters    *prometheus.CounterVec
	pending        prometheus.Gauge
	ackPending     prometheus.Gauge
	reg            prometheus.Registerer
	spoolCollected bool
}

var _ meter.Observer = (*meterMetrics)(nil)

func newMeterMetrics(reg prometheus.Registerer) *meterMetrics {
	o := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "tollgate", Subsystem: "meter", Name: name, Help: help}
	}
	h := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "tollgate", Subsystem: "meter", Name: name, Help: help, Buckets: buckets})
	}
	secs := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	m := &meterMetrics{
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
		reg:        reg,
	}
	reg.MustRegister(m.publish, m.publishFailed, m.batchSize, m.write, m.written, m.duplicates, m.redeliveries,
		m.deadLetters, m.pending, m.ackPending)
	return m
}

// collectSpool exposes the spool's depth and age.
func (m *meterMetrics) collectSpool(s *meter.Spool) {
	if m.spoolCollected {
		return
	}
	m.spoolCollected = true
	g := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tollgate", Subsystem: "meter", Name: name, Help: help}, f))
	}
	g("spool_events", "Usage events in the local spool, waiting for NATS.", func() float64 { n, _, _ := s.Stats(); return float64(n) })
	g("spool_bytes", "Bytes in the local spool.", func() float64 { _, b, _ := s.Stats(); return float64(b) })
	g("spool_oldest_seconds", "Age of the oldest spooled event (0 when empty).", func() float64 { _, _, a := s.Stats(); return a.Seconds() })
}

func (m *meterMetrics) Published(took time.Duration, err error) {
	if err != nil {
		m.publishFailed.Inc()
		return
	}
	m.publish.Observe(took.Seconds())
}

func (m *meterMetrics) BatchWritten(events, stored int, took time.Duration) {
	m.batchSize.Observe(float64(events))
	m.write.Observe(took.Seconds())
	m.written.Add(float64(stored))
	m.duplicates.Add(float64(events - stored))
}

func (m *meterMetrics) DeadLetter(reason string) { m.deadLetters.WithLabelValues(reason).Inc() }
func (m *meterMetrics) Redelivered()             { m.redeliveries.Inc() }
func (m *meterMetrics) ConsumerPending(pending, ackPending uint64) {
	m.pending.Set(float64(pending))
	m.ackPending.Set(float64(ackPending))
}
