package meter

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRefusalLeavesOutTransientAPIErrors: the service took every
// JetStream API error for a refusal of the stream as configured. Those a
// retry cures (JetStream between leaders, the stream or the consumer gone
// and made again by the next attempt) are not; a configuration JetStream
// refuses is, and NATS out of reach never was. TestServiceWaitsOutATransientAPIError
// meets 10008 from a real server.
func TestRefusalLeavesOutTransientAPIErrors(t *testing.T) {
	api := func(code jetstream.ErrorCode, desc string) error {
		return fmt.Errorf("usage stream TOLLGATE_USAGE: nats: %w", &jetstream.APIError{Code: 503, ErrorCode: code, Description: desc})
	}
	for _, c := range []struct {
		err     error
		refused bool
	}{
		{api(10008, "JetStream system temporarily unavailable"), false},
		{api(10009, "JetStream cluster can not handle request"), false},
		{fmt.Errorf("usage stream TOLLGATE_USAGE: %w", jetstream.ErrStreamNotFound), false},
		{fmt.Errorf("consume tollgate-meter: %w", jetstream.ErrConsumerNotFound), false},
		{fmt.Errorf("consume tollgate-meter: %w", jetstream.ErrConsumerDeleted), false},
		{context.DeadlineExceeded, false},
		{errors.New("nats: connection closed"), false},
		{api(10074, "replicas > 1 not supported in non-clustered mode"), true},
		{api(10065, "subjects overlap with an existing stream"), true},
		{api(10039, "JetStream not enabled for account"), true},
		{api(10023, "insufficient resources"), true},
	} {
		if got := Refused(c.err); got != c.refused {
			t.Errorf("Refused(%v) = %v, want %v", c.err, got, c.refused)
		}
	}
}
