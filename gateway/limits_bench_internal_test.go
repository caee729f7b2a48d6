package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// marshalShare is a LimitShare that encodes each publication as
// meter/keys.Share does (json.Marshal of each count's wire form), and
// holds no other gateway's counts: the cost a limited request pays on its
// own gateway.
type marshalShare struct{ bytes int }

func (s *marshalShare) Others(string) ([]LimitSecond, int64) { return nil, 0 }

func (s *marshalShare) Publish(counts []LimitCounts) {
	for _, c := range counts {
		b, _ := json.Marshal(c.Wire())
		s.bytes += len(b)
	}
}

// BenchmarkLimitAdmit: admit and release one request of a key with an
// rpm_limit and a tpm_limit, its minute holding requests in every second
// (the clock moves a second each request), publishing its counts at each
// change as the NATS share does. Reports the bytes published per request.
func BenchmarkLimitAdmit(b *testing.B) {
	s := &marshalShare{}
	l := newLimiter(s)
	t0 := time.Unix(1_800_000_000, 0)
	i := 0
	l.now = func() time.Time { return t0.Add(time.Duration(i) * time.Second) }
	k := &usage.KeyState{KeyID: "k", RPMLimit: 1 << 40, TPMLimit: 1 << 50}
	b.ReportAllocs()
	for b.Loop() {
		i++
		release, over := l.admit(k, 100)
		if over != nil {
			b.Fatal(over.message)
		}
		l.tokens(k, 250)
		release()
	}
	b.ReportMetric(float64(s.bytes)/float64(b.N), "published_B/op")
}
