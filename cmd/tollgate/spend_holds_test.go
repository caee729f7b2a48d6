package main

import (
	"context"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// burst sends n slow streamed chat completions with key at once and
// returns how many were served, and how many refused as held (429
// spend_held) and as spent (402).
func (s *stack) burst(key string, n int) (served, held, spent int) {
	s.t.Helper()
	return s.burstAt(s.gateway, key, n)
}

// burstAt is burst on the gateway at url.
func (s *stack) burstAt(url, key string, n int) (served, held, spent int) {
	s.t.Helper()
	body := `{"model":"sim-pro","max_tokens":24,"stream":true,"metadata":{"sim_delay_ms":"40"},` +
		`"messages":[{"role":"user","content":"Say hello to the ledger"}]}`
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				s.t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case resp.StatusCode == http.StatusOK && strings.Contains(string(b), "[DONE]"):
				served++
			case resp.StatusCode == http.StatusTooManyRequests && strings.Contains(string(b), `"spend_held"`) &&
				resp.Header.Get("Retry-After") == "1":
				held++
			case resp.StatusCode == http.StatusPaymentRequired:
				spent++
			default:
				s.t.Errorf("burst: %d %s", resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	return served, held, spent
}

// charged waits until the ledger holds n events of customer id and
// returns their charges and the largest one, in micro-units.
func (s *stack) charged(id string, n int) (total, largest float64) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := s.store.RecentEvents(context.Background(), id, 1000)
		if err != nil {
			s.t.Fatal(err)
		}
		if len(evs) == n {
			for _, e := range evs {
				c, ok := new(big.Float).SetString(e.Cost)
				if !ok {
					s.t.Fatalf("cost %q", e.Cost)
				}
				f, _ := c.Float64()
				total += f * 1e6
				largest = max(largest, f*1e6)
			}
			return total, largest
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("ledger holds %d events of %s, want %d", len(evs), id, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSpendLimitsHoldRequestsInFlight: twenty streams sent at once on a key
// with a daily limit of 0.001 USD, and on a prepaid customer with 0.001 of
// credit, each about 0.00026: before, all twenty were admitted (0.00525,
// five times the limit), the gateway knowing only that the limit had not
// yet been crossed. Now each holds what it may cost (its prompt's estimate
// and its max_tokens, rated) while it runs: the rest are refused with 429
// spend_held, and the key then spends until its charges reach the limit,
// never more than one request past it.
func TestSpendLimitsHoldRequestsInFlight(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	limitedID, _, limited := s.customer(`{"name":"limited"}`, `{"name":"k","daily_limit":"0.001"}`)
	prepaidID, _, prepaid := s.customer(`{"name":"prepaid","credit_limit":"0"}`, `{"name":"k"}`)
	s.adminDo("POST", "/admin/v1/customers/"+prepaidID+"/credits", `{"amount":"0.001","allow_sub_minor":true}`, http.StatusCreated, nil)
	s.refreshKeys()
	for _, c := range []struct {
		name, id, key string
	}{{"daily limit", limitedID, limited}, {"prepaid credit", prepaidID, prepaid}} {
		served, held, spent := s.burst(c.key, 20)
		t.Logf("%s: 20 at once: %d served, %d held, %d spent", c.name, served, held, spent)
		if served == 0 || served > 4 || held+spent != 20-served || held == 0 {
			t.Fatalf("%s: 20 at once: %d served, %d held, %d spent; want 1 to 4 served, the rest held", c.name, served, held, spent)
		}
		// One at a time now, until refused: the charges reach the limit.
		for range 10 {
			n, _, sp := s.burst(c.key, 1)
			if sp == 1 {
				break
			}
			served += n
			s.charged(c.id, served)
			s.refreshKeys()
		}
		total, largest := s.charged(c.id, served)
		if code, _ := s.chatAs(c.key); code != http.StatusPaymentRequired {
			t.Fatalf("%s: after %.1f micro-units charged of 1,000: %d, want 402", c.name, total, code)
		}
		if total < 1000 || total > 1000+largest {
			t.Fatalf("%s: %d requests charged %.1f micro-units on a limit of 1,000 (largest %.1f); want the limit reached, by at most one request past it",
				c.name, served, total, largest)
		}
		t.Logf("%s: %d served, %.1f micro-units charged of 1,000", c.name, served, total)
	}
	var b ledger.Balance
	s.adminDo("GET", "/admin/v1/customers/"+prepaidID+"/balance", "", http.StatusOK, &b)
	if bal, _ := new(big.Float).SetString(b.Balance); bal.Cmp(big.NewFloat(-0.0003)) < 0 {
		out, _ := json.Marshal(b)
		t.Fatalf("prepaid balance %s; want at most one request below 0", out)
	}
}

// sendAll sends n copies of body to path with key at once and returns the
// count of each status.
func (s *stack) sendAll(key, path, body string, n int) map[int]int {
	s.t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[int]int{}
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", s.gateway+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				s.t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			out[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// TestASecondGatewayLearnsTheSpendAtItsMarks: each gateway counts only its
// own charges between two states of a key, and the ledger published one
// only when the spend crossed the limit: a key that had spent half its
// $0.001 daily limit through one gateway could hold the whole of it in
// flight on another (3 of a burst served there, $0.0013 charged). The
// ledger now publishes the state as the spend passes half, three quarters
// and nine tenths of the limit: the other gateway holds what is left.
func TestASecondGatewayLearnsTheSpendAtItsMarks(t *testing.T) {
	t.Parallel()
	natsDir, addr := t.TempDir(), freeAddr(t)
	natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	other := s.gatewayOnly()
	id, _, key := s.customer(`{"name":"two gateways"}`, `{"name":"k","daily_limit":"0.001"}`)
	s.refreshKeys()
	for range 2 { // 0.000525: past half
		if code, _ := s.chatAs(key); code != http.StatusOK {
			t.Fatalf("through the first gateway: %d", code)
		}
	}
	s.charged(id, 2)
	s.refreshKeys()                    // published; the other gateway's watch has it within milliseconds
	time.Sleep(300 * time.Millisecond) // (it has no way to say so)
	served, held, spent := s.burstAt(other, key, 10)
	total, largest := s.charged(id, 2+served)
	if served > 2 || held+spent != 10-served || total > 1000+largest {
		t.Fatalf("10 at once through the other gateway after 525 of 1,000 micro-units: %d served, %d held, %d spent, %.1f charged; "+
			"want at most 2 served, within one request of the limit", served, held, spent, total)
	}
	t.Logf("the other gateway: %d served, %d held, %d spent; %.1f micro-units charged of 1,000", served, held, spent, total)
}

// TestChargesAfterAStateCountUntilTheNext: a key's state that arrives while
// its streams run holds none of their charges; they count from its
// arrival. Counted from the key's next request instead, they were thrown
// away: a review's 40 requests at once after 8 slow streams spanned a
// state (past half of a $0.01 limit) admitted 16-19, and the key ended at
// $0.0116-0.0123.
func TestChargesAfterAStateCountUntilTheNext(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	id, _, key := s.customer(`{"name":"state mid-stream"}`, `{"name":"k","daily_limit":"0.01"}`)
	s.refreshKeys()
	fast := `{"model":"sim-pro","max_tokens":24,"messages":[{"role":"user","content":"Say hello to the ledger"}]}`
	slow := `{"model":"sim-pro","max_tokens":24,"stream":true,"metadata":{"sim_chunks":"4","sim_delay_ms":"700"},` +
		`"messages":[{"role":"user","content":"Say hello to the ledger"}]}`
	served := s.sendAll(key, "/v1/chat/completions", fast, 15)[http.StatusOK] // below half
	_, largest := s.charged(id, served)
	s.refreshKeys()
	var wg sync.WaitGroup
	var slowCodes, fastCodes map[int]int
	wg.Go(func() { slowCodes = s.sendAll(key, "/v1/chat/completions", slow, 8) })
	time.Sleep(50 * time.Millisecond)
	wg.Go(func() { fastCodes = s.sendAll(key, "/v1/chat/completions", fast, 5) }) // past half: a state, while the slow ones run
	wg.Wait()
	served += slowCodes[http.StatusOK] + fastCodes[http.StatusOK]
	s.charged(id, served)
	served += s.sendAll(key, "/v1/chat/completions", fast, 40)[http.StatusOK]
	for range 20 { // then one at a time until refused
		s.refreshKeys()
		if code, _ := s.chatAs(key); code != http.StatusOK {
			break
		}
		served++
		s.charged(id, served)
	}
	if total, _ := s.charged(id, served); total > 10000+largest {
		t.Fatalf("%d requests charged %.1f micro-units on a limit of 10,000: more than one request (%.1f) past it", served, total, largest)
	}
}
