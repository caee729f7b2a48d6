package main

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestAGatewayThatJoinsHearsTheOthersCountsFirst: a gateway that starts
// (a restart, a rollout, one more behind the load balancer) beside one
// that is serving a key served the key's whole rpm_limit and max_concurrent
// again in its first second, though the other held them all: it had not
// yet heard the others' counts (sent once a second), and counted only its
// own, none. docs/pricing-and-budgets.md says a gateway that restarts
// starts from the others' counts, and that a restart loses only its own
// share of the minute. (Found by review: a key with an rpm_limit of 10,
// its 10 requests made on one gateway, got 10 more from the other
// restarted; a max_concurrent of 3, 3 streams open on one, 3 more.)
func TestAGatewayThatJoinsHearsTheOthersCountsFirst(t *testing.T) {
	natsDir, addr := t.TempDir(), freeAddr(t)
	natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	a := s.gatewayOnly()

	var k, c struct {
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/keys", `{"name":"rpm","rpm_limit":3}`, http.StatusCreated, &k)
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/keys", `{"name":"conc","max_concurrent":1}`, http.StatusCreated, &c)
	for i := range 3 {
		if code, errCode, _, _ := chatOn(t, a, k.Key); code != http.StatusOK {
			t.Fatalf("request %d of 3 on A: %d %s", i+1, code, errCode)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	slow := chatBody(30, false, `"sim_delay_ms":"200"`) // about 6 s open
	wg.Go(func() {
		if code, errCode, _, _ := chatOn(t, a, c.Key, slow); code != http.StatusOK {
			t.Errorf("the open request on A: %d %s", code, errCode)
		}
	})
	time.Sleep(200 * time.Millisecond) // open on A

	b := s.gatewayOnly() // its listener is up: a load balancer may send it requests now
	if code, errCode, _, _ := chatOn(t, b, k.Key); code != http.StatusTooManyRequests || errCode != "rate_limit_exceeded" {
		t.Errorf("rpm_limit 3, its 3 requests made on A, a 4th on B as B started: %d %q; want 429", code, errCode)
	}
	if code, errCode, _, _ := chatOn(t, b, c.Key); code != http.StatusTooManyRequests || errCode != "rate_limit_exceeded" {
		t.Errorf("max_concurrent 1, its request open on A, a 2nd on B as B started: %d %q; want 429", code, errCode)
	}
}
