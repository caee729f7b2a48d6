package meter

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRefusedForGood: the PubAck errors that a resend cannot change (the
// stream's limits, storage full, sealed) end a hand-over at once; those
// that pass by themselves (a duplicate still being replicated in a
// cluster, a store closed while its stream restarts) and unknown ones are
// sent again, up to handOverNoProgress. The descriptions are nats-server's.
func TestRefusedForGood(t *testing.T) {
	for _, c := range []struct {
		code jetstream.ErrorCode
		desc string
		want bool
	}{
		{10054, "message size exceeds maximum allowed", true},
		{10097, "header size exceeds maximum allowed of 64k", true},
		{10077, "maximum messages exceeded", true},
		{10077, "maximum bytes exceeded", true},
		{10077, "maximum messages per subject exceeded", true},
		{10077, "message too large", true},
		{10077, "store is closed", false},
		{10002, "resource limits exceeded for account", true},
		{10023, "insufficient resources", true},
		{10109, "invalid operation on sealed stream", true},
		{10158, "duplicate message id is in process", false},
		{10999, "something new", false},
	} {
		if got := refusedForGood(&jetstream.APIError{ErrorCode: c.code, Description: c.desc}); got != c.want {
			t.Errorf("refusedForGood(%d %q) = %v, want %v", c.code, c.desc, got, c.want)
		}
	}
}
