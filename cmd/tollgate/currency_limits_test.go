package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// chatCode sends s.chatAs's request with key and returns the status and
// the error's code ("" when none).
func (s *stack) chatCode(key string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.gateway+"/v1/chat/completions",
		strings.NewReader(`{"model":"sim-pro","max_tokens":24,"messages":[{"role":"user","content":"Say hello to the ledger"}]}`))
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
	return resp.StatusCode, body.Error.Code
}

// TestSpendLimitsHoldOnlyInTheCustomersCurrency: a spend limit counts
// charges in its customer's currency, and there are no exchange rates. A
// key with a daily limit, or a key of a customer with a credit limit, is
// refused (402 currency_mismatch) a model priced in another currency,
// before any upstream call, rather than served without a limit. An
// unlimited key of the same customer is served, and so is a limited one
// once the customer has a custom price in its own currency.
func TestSpendLimitsHoldOnlyInTheCustomersCurrency(t *testing.T) {
	s := newStack(t, nil)
	// The demo book prices sim-pro in USD, 0.0002625 a request.
	euro, _, limited := s.customer(`{"name":"euro","currency":"EUR"}`, `{"name":"small","daily_limit":"0.0004"}`)
	var free struct {
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+euro+"/keys", `{"name":"free"}`, http.StatusCreated, &free)
	prepaid, _, prepaidKey := s.customer(`{"name":"euro-prepaid","currency":"EUR","credit_limit":"0"}`, `{"name":"k"}`)
	s.adminDo("POST", "/admin/v1/customers/"+prepaid+"/credits", `{"amount":"0.0005"}`, http.StatusCreated, nil)
	s.refreshKeys()

	for range 3 {
		if code, errCode := s.chatCode(limited); code != http.StatusPaymentRequired || errCode != "currency_mismatch" {
			t.Fatalf("EUR key with a daily limit, USD-priced model: %d %q, want 402 currency_mismatch", code, errCode)
		}
		if code, errCode := s.chatCode(prepaidKey); code != http.StatusPaymentRequired || errCode != "currency_mismatch" {
			t.Fatalf("prepaid EUR customer, USD-priced model: %d %q, want 402 currency_mismatch", code, errCode)
		}
	}
	if code, reqID := s.chatAs(free.Key); code != http.StatusOK {
		t.Fatalf("the customer's key without a limit: %d, want 200", code)
	} else {
		s.event(reqID)
	}
	if st := s.sim.Stats(); st.Requests.Total != 1 {
		t.Fatalf("the upstream saw %d requests, want 1 (the unlimited key's): a refusal came after an upstream call", st.Requests.Total)
	}

	// A custom price in EUR: the daily limit holds, so the key is served up to it.
	s.adminDo("POST", "/admin/v1/customers/"+euro+"/overrides",
		`{"model":"sim-pro","price":{"currency":"EUR","input":"10","output":"10"},"effective_from":"2020-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.refreshKeys()
	served := 0
	for range 6 {
		code, reqID := s.chatAs(limited)
		if code == http.StatusPaymentRequired {
			break
		}
		if code != http.StatusOK {
			t.Fatalf("with a EUR custom price: %d", code)
		}
		served++
		s.event(reqID)
		s.refreshKeys()
	}
	if served == 0 || served == 6 {
		t.Fatalf("served %d requests on a 0.0004 EUR daily limit at a EUR custom price, want some and then 402", served)
	}
}

// TestCurrencyRefusalFallsOverToAModelInTheCustomersCurrency: a model
// priced in another currency is skipped for a limited key, and its
// fallback, priced in the customer's currency, serves the request.
func TestCurrencyRefusalFallsOverToAModelInTheCustomersCurrency(t *testing.T) {
	s := routingStack(t) // "smart" falls back to "cheap"
	s.adminDo("POST", "/admin/v1/prices", `{"model":"smart","currency":"USD","input":"1","output":"1","effective_from":"2020-01-01T00:00:00Z"}`,
		http.StatusCreated, nil)
	euro, _, key := s.customer(`{"name":"euro","currency":"EUR"}`, `{"name":"small","monthly_limit":"5"}`)
	s.adminDo("POST", "/admin/v1/customers/"+euro+"/overrides",
		`{"model":"cheap","price":{"currency":"EUR","input":"1","output":"1"},"effective_from":"2020-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.refreshKeys()
	req, _ := http.NewRequest("POST", s.gateway+"/v1/chat/completions",
		strings.NewReader(`{"model":"smart","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 from the fallback", resp.StatusCode)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.Model != "cheap" || e.Currency != "EUR" {
		t.Fatalf("event model %q in %q, want cheap in EUR", e.Model, e.Currency)
	}
	if n := s.sim.Stats().ByDeployment["east"].Requests.Total + s.sim.Stats().ByDeployment["west"].Requests.Total; n != 0 {
		t.Fatalf("the USD-priced deployments saw %d requests, want 0", n)
	}
}
