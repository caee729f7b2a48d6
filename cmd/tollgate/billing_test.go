package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// chatAs sends a small sim-pro chat completion with key and returns the
// status and the request id.
func (s *stack) chatAs(key string) (int, string) {
	s.t.Helper()
	status, code, id := s.chat(key)
	if status == http.StatusPaymentRequired && code != "insufficient_quota" {
		s.t.Fatalf("402 with code %q, want insufficient_quota", code)
	}
	return status, id
}

// chatCode is chatAs's request, returning the status and the error's code
// ("" when none), whatever they are.
func (s *stack) chatCode(key string) (int, string) {
	s.t.Helper()
	status, code, _ := s.chat(key)
	return status, code
}

// chat sends a short sim-pro chat completion with key and returns the
// status, the error's code ("" when none) and the X-Request-Id.
func (s *stack) chat(key string) (status int, code, requestID string) {
	s.t.Helper()
	return s.chatModel(key, "sim-pro")
}

// chatModel is chat for another model.
func (s *stack) chatModel(key, model string) (status int, code, requestID string) {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.gateway+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","max_tokens":24,"messages":[{"role":"user","content":"Say hello to the ledger"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error.Code, resp.Header.Get("X-Request-Id")
}

// customer makes a customer and a key through the admin API.
func (s *stack) customer(body, keyBody string) (id, keyID, secret string) {
	s.t.Helper()
	var c struct {
		ID string `json:"id"`
	}
	s.adminDo("POST", "/admin/v1/customers", body, http.StatusCreated, &c)
	var k struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+c.ID+"/keys", keyBody, http.StatusCreated, &k)
	return c.ID, k.ID, k.Key
}

// refreshKeys returns once every key change committed so far (the
// admin's, and the meter's budget flips) is in the gateway's key cache.
func (s *stack) refreshKeys() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.app.keySync.Sync(ctx); err != nil {
		s.t.Fatal(err)
	}
	if err := s.app.keys.CatchUp(ctx); err != nil {
		s.t.Fatal(err)
	}
}

// TestPrepaidBudget: a strictly prepaid customer is served while its
// balance lasts, refused with 402 insufficient_quota once it is spent, and
// served again after a top-up.
func TestPrepaidBudget(t *testing.T) {
	s := newStack(t, nil)
	id, _, key := s.customer(`{"name":"prepaid","credit_limit":"0"}`, `{"name":"k"}`)
	s.refreshKeys()
	if code, _ := s.chatAs(key); code != http.StatusPaymentRequired {
		t.Fatalf("no credit yet: status %d, want 402", code)
	}
	// Each request costs 0.0002625 USD (see README): 0.0005 buys two.
	s.adminDo("POST", "/admin/v1/customers/"+id+"/credits", `{"amount":"0.0005","memo":"trial","allow_sub_minor":true}`, http.StatusCreated, nil)
	s.refreshKeys()
	served := 0
	for range 5 {
		code, reqID := s.chatAs(key)
		if code == http.StatusPaymentRequired {
			break
		}
		if code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		served++
		s.event(reqID)
		s.refreshKeys()
	}
	if served != 2 {
		t.Fatalf("served %d requests on 0.0005 of credit at 0.0002625 each, want 2", served)
	}
	var b ledger.Balance
	s.adminDo("GET", "/admin/v1/customers/"+id+"/balance", "", http.StatusOK, &b)
	if b.Balance != "-0.000025" || b.Credits != "0.0005" || b.Charges != "0.000525" || *b.Available != "-0.000025" {
		t.Fatalf("balance = %+v", b)
	}
	s.adminDo("POST", "/admin/v1/customers/"+id+"/credits", `{"amount":"1","idempotency_key":"topup-1"}`, http.StatusCreated, nil)
	s.adminDo("POST", "/admin/v1/customers/"+id+"/credits", `{"amount":"1","idempotency_key":"topup-1"}`, http.StatusCreated, nil) // a retry
	s.refreshKeys()
	if code, _ := s.chatAs(key); code != http.StatusOK {
		t.Fatalf("after a top-up: status %d, want 200", code)
	}
	s.adminDo("GET", "/admin/v1/customers/"+id+"/balance", "", http.StatusOK, &b)
	if b.Credits != "1.0005" {
		t.Fatalf("credits = %s, want 1.0005: the retried top-up counted twice?", b.Credits)
	}
}

// TestKeyDailyLimit: a key with a daily limit is refused past it; the
// customer's other keys are not.
func TestKeyDailyLimit(t *testing.T) {
	s := newStack(t, nil)
	id, _, limited := s.customer(`{"name":"limited"}`, `{"name":"small","daily_limit":"0.0004"}`)
	var other struct {
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+id+"/keys", `{"name":"free"}`, http.StatusCreated, &other)
	s.refreshKeys()
	for i := range 2 {
		code, reqID := s.chatAs(limited)
		if code != http.StatusOK {
			t.Fatalf("request %d: %d", i, code)
		}
		s.event(reqID)
	}
	s.refreshKeys()
	if code, _ := s.chatAs(limited); code != http.StatusPaymentRequired {
		t.Fatalf("past the daily limit: %d, want 402", code)
	}
	if code, _ := s.chatAs(other.Key); code != http.StatusOK {
		t.Fatalf("the customer's other key: %d, want 200", code)
	}
}

// TestRevokedKeyStopsWithinTwoSeconds runs the real snapshot refresh loop.
func TestRevokedKeyStopsWithinTwoSeconds(t *testing.T) {
	s := newStack(t, nil)
	_, keyID, key := s.customer(`{"name":"revoke-me"}`, `{"name":"k"}`)
	s.refreshKeys()
	if code, _ := s.chatAs(key); code != http.StatusOK {
		t.Fatalf("before revocation: %d", code)
	}
	req, _ := http.NewRequest("POST", s.admin+"/admin/v1/keys/"+keyID+"/revoke", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if p := resp.Header.Get("Tollgate-Propagation"); resp.StatusCode != http.StatusOK || p != "done" {
		t.Fatalf("revoke: %d, Tollgate-Propagation %q; want 200, done (NATS is up)", resp.StatusCode, p)
	}
	revoked := time.Now()
	for {
		code, _ := s.chatAs(key)
		if code == http.StatusUnauthorized {
			t.Logf("refused %s after revocation", time.Since(revoked).Round(time.Millisecond))
			return
		}
		if time.Since(revoked) > 2*time.Second {
			t.Fatalf("a revoked key was still served after %s", time.Since(revoked))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTenantIsolation: through every customer API endpoint, a customer sees
// only its own data, whatever it asks for.
func TestTenantIsolation(t *testing.T) {
	s := newStack(t, nil)
	a, _, aKey := s.customer(`{"name":"a"}`, `{"name":"a"}`)
	_, bKeyID, bKey := s.customer(`{"name":"b"}`, `{"name":"b"}`)
	s.refreshKeys()
	for _, key := range []string{aKey, bKey, bKey} {
		if code, id := s.chatAs(key); code != 200 {
			t.Fatal(code)
		} else {
			s.event(id)
		}
	}
	get := func(key, path string, want int, out any) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.gateway+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
	}
	for _, group := range []string{"model", "key", "hour", "day", "month"} {
		var page ledger.UsagePage
		get(aKey, "/v1/usage?group_by="+group, 200, &page)
		var requests int64
		for _, r := range page.Data {
			requests += r.Requests
			if r.KeyID != "" && r.KeyID == bKeyID {
				t.Fatalf("group_by=%s shows b's key to a: %+v", group, page)
			}
		}
		if requests != 1 {
			t.Fatalf("group_by=%s: a sees %d requests, want its 1: %+v", group, requests, page)
		}
	}
	var page ledger.UsagePage
	get(aKey, "/v1/usage?key_id="+bKeyID, 200, &page)
	if len(page.Data) != 0 {
		t.Fatalf("a filtered by b's key and saw %+v", page)
	}
	get(aKey, "/v1/usage?customer_id="+a, 400, nil)
	get(aKey, "/v1/usage?group_by=customer", 400, nil)
	var bal ledger.Balance
	get(aKey, "/v1/balance", 200, &bal)
	if bal.CustomerID != a || bal.Charges != "0.0002625" {
		t.Fatalf("a's balance = %+v", bal)
	}
	get("tg-nobody", "/v1/balance", 401, nil)
	get("", "/v1/usage", 401, nil)
}
