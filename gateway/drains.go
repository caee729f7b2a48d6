package gateway

import "sync"

// drainPool counts the streams read on after their clients left (see
// exchange.clientLeft), at most max at once. While it is at least three
// quarters full, a customer already holding a quarter of it gets no more:
// one customer abandoning streams by the thousand (each billed to it)
// held every slot, and every other customer's disconnects were cut off
// and estimated instead of drained for their usage (found by review). A
// customer alone still gets three quarters of the pool; the others keep
// a quarter among them.
type drainPool struct {
	max int

	mu     sync.Mutex
	total  int
	byUser map[string]int // by customer id
}

func newDrainPool(max int) *drainPool { return &drainPool{max: max, byUser: map[string]int{}} }

// take takes a slot for customer, and reports whether it got one.
func (p *drainPool) take(customer string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	held := p.byUser[customer]
	if p.total >= p.max || (p.total*4 >= 3*p.max && held*4 >= p.max) {
		return false
	}
	p.total++
	p.byUser[customer] = held + 1
	return true
}

// release gives back a slot customer took.
func (p *drainPool) release(customer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total--
	if p.byUser[customer]--; p.byUser[customer] <= 0 {
		delete(p.byUser, customer)
	}
}
