package gateway

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// shareNet joins limiters in one process, as NATS joins gateways: each
// member publishes, and sees the sum of the others.
type shareNet struct {
	mu   sync.Mutex
	seen map[int]map[string]LimitCounts
}

func (n *shareNet) member(i int) *memberShare { return &memberShare{net: n, me: i} }

type memberShare struct {
	net *shareNet
	me  int
}

func (m *memberShare) Others(key string) (seconds []LimitSecond, open int64) {
	m.net.mu.Lock()
	defer m.net.mu.Unlock()
	for i, counts := range m.net.seen {
		if i != m.me {
			c := counts[key]
			seconds, open = append(seconds, c.Seconds...), open+c.Open
		}
	}
	return seconds, open
}

func (m *memberShare) Publish(counts []LimitCounts) {
	m.net.mu.Lock()
	defer m.net.mu.Unlock()
	if m.net.seen[m.me] == nil {
		m.net.seen[m.me] = map[string]LimitCounts{}
	}
	for _, c := range counts {
		old, ok := m.net.seen[m.me][c.KeyID]
		if ok && c.Seq < old.Seq {
			continue // as meter/keys.Share keeps the latest reading (delivered in order here)
		}
		if c.Partial {
			// A change's one second, merged into the minute heard, as
			// meter/keys.Share does.
			merged := slices.Clone(old.Seconds)
			for _, sec := range c.Seconds {
				if i := slices.IndexFunc(merged, func(h LimitSecond) bool { return h.Unix == sec.Unix }); i >= 0 {
					merged[i] = sec
				} else {
					merged = append(merged, sec)
				}
			}
			c.Seconds = merged
		}
		m.net.seen[m.me][c.KeyID] = c
	}
}

func TestLimiterOneGateway(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newLimiter(nil)
	l.now = func() time.Time { return now }
	k := &usage.KeyState{KeyID: "k", RPMLimit: 3, MaxConcurrent: 2, TPMLimit: 100}
	r1, over := l.admit(k, 0)
	r2, over2 := l.admit(k, 0)
	if over != nil || over2 != nil {
		t.Fatal("refused under the limits")
	}
	if _, over := l.admit(k, 0); over == nil || over.kind != "concurrency" {
		t.Fatalf("third open request: %+v, want the concurrency limit", over)
	}
	r1()
	r1() // idempotent
	r3, over := l.admit(k, 0)
	if over != nil {
		t.Fatalf("after a release: %+v", over)
	}
	r2()
	r3()
	now = now.Add(20 * time.Second)
	if _, over := l.admit(k, 0); over == nil || over.kind != "requests" || over.retryAfter != 40*time.Second {
		t.Fatalf("fourth request in the minute: %+v, want requests, retry after 40s", over)
	}
	now = now.Add(41 * time.Second) // the first three leave the minute
	release, over := l.admit(k, 0)
	if over != nil {
		t.Fatalf("a minute later: %+v", over)
	}
	release()
	l.tokens(k, 150)
	if _, over := l.admit(k, 0); over == nil || over.kind != "tokens" {
		t.Fatalf("over the tokens per minute: %+v", over)
	}
	free := &usage.KeyState{KeyID: "free"}
	for range 1000 {
		if _, over := l.admit(free, 0); over != nil {
			t.Fatal("a key without limits was refused")
		}
	}
	if len(l.keys) != 1 {
		t.Fatalf("%d keys counted, want only the limited one", len(l.keys))
	}
}

// TestLimiterAcrossGateways: two gateways sharing counts as they move
// hold one limit between them.
func TestLimiterAcrossGateways(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	net := &shareNet{seen: map[int]map[string]LimitCounts{}}
	a, b := newLimiter(net.member(0)), newLimiter(net.member(1))
	a.now, b.now = func() time.Time { return now }, func() time.Time { return now }
	k := &usage.KeyState{KeyID: "k", RPMLimit: 10}
	admitted := 0
	for i := range 30 {
		l := a
		if i%2 == 1 {
			l = b
		}
		if release, over := l.admit(k, 0); over == nil {
			admitted++
			release()
		}
	}
	if admitted != 10 {
		t.Fatalf("%d admitted across two gateways, want the limit of 10", admitted)
	}
}

// TestLimiterHoldsTheEstimateUntilRelease: under a tpm_limit, an open
// request holds its estimate in the minute, so requests sent together do
// not each find it empty; its release gives the estimate back (its real
// tokens are counted by tokens as it settles).
func TestLimiterHoldsTheEstimateUntilRelease(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newLimiter(nil)
	l.now = func() time.Time { return now }
	k := &usage.KeyState{KeyID: "k", TPMLimit: 100}
	r1, over := l.admit(k, 60)
	if over != nil {
		t.Fatal(over)
	}
	r2, over := l.admit(k, 50) // 60 held: under 100
	if over != nil {
		t.Fatal(over)
	}
	if _, over := l.admit(k, 1); over == nil || over.kind != "tokens" {
		t.Fatalf("with 110 tokens held: %+v, want the tokens limit", over)
	}
	r1()
	r2()
	l.tokens(k, 30) // what they used
	if r, over := l.admit(k, 1); over != nil {
		t.Fatalf("after the releases, 30 tokens used: %+v", over)
	} else {
		r()
	}
	now = now.Add(61 * time.Second)
	r3, _ := l.admit(k, 10)
	now = now.Add(61 * time.Second) // released after its second left the minute: nothing to give back
	r3()
	if req, tok := l.keys["k"].sums(now.Unix()); req != 0 || tok != 0 {
		t.Fatalf("a minute after: %d requests, %d tokens, want none", req, tok)
	}
}
