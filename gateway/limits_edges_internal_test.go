package gateway

import (
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The limiter and its share, edges found by review.

// gatedShare is a member of a shareNet whose first Publish is held at its
// start until gate closes, as a goroutine is when the scheduler runs
// another between limiter.publish's unlock and the NATS publish.
type gatedShare struct {
	*memberShare
	mu      sync.Mutex
	calls   int
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedShare) Publish(counts []LimitCounts) {
	g.mu.Lock()
	g.calls++
	first := g.calls == 1
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.gate
	}
	g.memberShare.Publish(counts)
}

// limiter.publish takes a key's counts under l.mu and hands them to the
// share after unlocking, so two publications of one key on one gateway can
// reach the share in the opposite order; the others kept the last they
// heard (meter/keys.Share.receive overwrote by gateway), here an older,
// lower count, until the next change or the next 1 s snapshot. Counts now
// carry a Seq, and receivers keep the highest. Gateway A
// holds 2 open requests of a key with max_concurrent 2, gateway B is told
// it holds 1, and admits a third.
func TestLimitShareKeepsTheLatestReading(t *testing.T) {
	net := &shareNet{seen: map[int]map[string]LimitCounts{}}
	ga := &gatedShare{memberShare: net.member(0), entered: make(chan struct{}), gate: make(chan struct{})}
	a, b := newLimiter(ga), newLimiter(net.member(1))
	k := &usage.KeyState{KeyID: "k", MaxConcurrent: 2}

	done := make(chan struct{})
	go func() { // first admission on A: counts {open 1}, its publish delayed
		defer close(done)
		if _, over := a.admit(k, 0); over != nil {
			t.Errorf("first request on A refused: %+v", over)
		}
	}()
	<-ga.entered
	if _, over := a.admit(k, 0); over != nil { // second admission on A: {open 2}, published at once
		t.Fatalf("second request on A refused: %+v", over)
	}
	close(ga.gate) // the first publication lands last
	<-done

	a.mu.Lock()
	open := a.keys["k"].open
	a.mu.Unlock()
	_, heard := b.share.Others("k")
	if _, over := b.admit(k, 0); over == nil {
		t.Fatalf("A holds %d open requests, B heard %d, and B admitted a third at max_concurrent 2", open, heard)
	}
}
