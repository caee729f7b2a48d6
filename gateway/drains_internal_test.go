package gateway

import "testing"

// TestDrainPoolKeepsAQuarterForOthers: one customer abandoning streams by
// the thousand held every drain slot (max_drains), and every other
// customer's disconnects were estimated instead of drained (found by
// review). Alone it gets three quarters of the pool; the others keep a
// quarter; released slots come back.
func TestDrainPoolKeepsAQuarterForOthers(t *testing.T) {
	p := newDrainPool(8)
	n := 0
	for p.take("hog") {
		n++
	}
	if n != 6 {
		t.Fatalf("one customer alone took %d of 8 drain slots, want 6", n)
	}
	if !p.take("b") || !p.take("c") || p.take("d") {
		t.Fatalf("others after the hog: want 2 slots, then the pool full")
	}
	p.release("hog")
	if p.take("hog") {
		t.Error("the hog took a slot back while holding a quarter and the pool three quarters full")
	}
	if !p.take("d") {
		t.Error("another customer could not take the slot the hog released")
	}
	for range 5 {
		p.release("hog")
	}
	p.release("b")
	p.release("c")
	p.release("d")
	if p.total != 0 || len(p.byUser) != 0 {
		t.Errorf("after every release: total %d, %v", p.total, p.byUser)
	}
}
