package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamNotReadyTellsARefusalFromNATSOutOfReach (a review): a usage
// stream that JetStream refuses as configured (meter.replicas 3 on a
// single server) was logged "not reachable yet; events are spooled until it
// is" at WARN, though NATS answered, the gateway published to the stream
// already there, and no wait would cure it. A refusal is now an ERROR
// naming the setting to check; NATS out of reach stays a WARN.
func TestStreamNotReadyTellsARefusalFromNATSOutOfReach(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	refused := &jetstream.APIError{Code: 500, ErrorCode: 10074, Description: "replicas > 1 not supported in non-clustered mode"}
	streamNotReady(log, "usage stream", "events are spooled until it is", refused)
	if got := buf.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "refused by JetStream as configured") ||
		!strings.Contains(got, "meter.replicas") || strings.Contains(got, "not reachable") {
		t.Errorf("a refusal logged:\n%s", got)
	}
	buf.Reset()
	streamNotReady(log, "usage stream", "events are spooled until it is", errors.New("nats: no servers available for connection"))
	if got := buf.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "usage stream not reachable yet; events are spooled until it is") {
		t.Errorf("NATS out of reach logged:\n%s", got)
	}
	buf.Reset()
	streamNotReady(log, "dead-letter stream", "", errors.New("nats: timeout"))
	if got := buf.String(); !strings.Contains(got, `msg="dead-letter stream not reachable yet"`) {
		t.Errorf("the dead-letter stream out of reach logged:\n%s", got)
	}
}
