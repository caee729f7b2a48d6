package keys_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestShareOpenCountsNeverWrap: open counts published on NATS (anyone on
// it may publish) that add up past int64 are held at 2^62, never wrapped
// to a negative sum that would let a gateway admit past a key's
// max_concurrent. (Mutant: Others adding without its bound.)
func TestShareOpenCountsNeverWrap(t *testing.T) {
	t.Parallel()
	shares := newShares(t, 3)
	shares[0].Publish([]usage.LimitCounts{{KeyID: "k", Open: 1 << 62}})
	shares[1].Publish([]usage.LimitCounts{{KeyID: "k", Open: 1 << 62}})
	eventually(t, 2*time.Second, "both gateways' open counts, at the bound", func() bool {
		_, open := shares[2].Others("k")
		return open == 1<<62
	})
}

// TestShareForgetsASilentGateway: the counts of a gateway not heard from
// for shareTTL (3 s: it stopped, or lost NATS) no longer count against
// the key's limits on the others, even while no other message arrives to
// sweep them. (Mutant: Others without its age check.)
func TestShareForgetsASilentGateway(t *testing.T) {
	t.Parallel()
	shares := newShares(t, 2)
	shares[0].Publish([]usage.LimitCounts{{KeyID: "k", Open: 3,
		Seconds: []usage.LimitSecond{{Unix: time.Now().Unix(), Requests: 3, Tokens: 30}}}})
	eventually(t, 2*time.Second, "the counts heard", func() bool {
		_, open := shares[1].Others("k")
		return open == 3
	})
	eventually(t, 5*time.Second, "the silent gateway's counts forgotten", func() bool {
		seconds, open := shares[1].Others("k")
		return open == 0 && len(seconds) == 0
	})
}
