package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/gateway"

	"github.com/tollgate-dev/tollgate/meter/keys"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

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
	s.adminDo("POST", "/admin/v1/customers/"+prepaid+"/credits", `{"amount":"0.0005","allow_sub_minor":true}`, http.StatusCreated, nil)
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

// TestSpendLimitsRefuseAnUnpricedModel: a model with no price in force is
// stored at cost 0 until re-rated, so no spend limit could count it: a
// key with a daily limit used one (by a provider/model name the book does
// not price) without limit. It is refused (402 unpriced_model) before any
// upstream call; with prefix_routes: all, a key without limits is served,
// and the event is unpriced.
func TestSpendLimitsRefuseAnUnpricedModel(t *testing.T) {
	s := newStack(t, func(c *fileConfig) { c.Providers[0].PrefixRoutes = gateway.PrefixAll })
	_, _, limited := s.customer(`{"name":"capped"}`, `{"name":"small","daily_limit":"1"}`)
	_, _, free := s.customer(`{"name":"open"}`, `{"name":"k"}`)
	s.refreshKeys()
	before := s.sim.Stats().Requests.Total
	if code, errCode, _ := s.chatModel(limited, "sim/sim-unpriced"); code != http.StatusPaymentRequired || errCode != "unpriced_model" {
		t.Fatalf("a key with a daily limit, an unpriced model: %d %q, want 402 unpriced_model", code, errCode)
	}
	if n := s.sim.Stats().Requests.Total - before; n != 0 {
		t.Fatalf("the upstream saw %d requests of the refused key", n)
	}
	code, _, id := s.chatModel(free, "sim/sim-unpriced")
	if code != http.StatusOK {
		t.Fatalf("a key without limits, an unpriced model: %d, want 200", code)
	}
	if e := s.event(id); !e.Unpriced {
		t.Fatalf("event %+v: want it stored unpriced", e)
	}
}

// TestPrefixRoutesServeOnlyPricedModels: the client chooses a
// provider/model name, and a provider takes many spellings of one model
// (another case, a dated snapshot, a trailing space): each was stored
// unpriced, at cost 0, for any key without limits. By default
// (prefix_routes: priced) such a name is refused (402 unpriced_model)
// before any upstream call until its model has a price in force or the
// customer a custom price for it; prefix_routes: none serves the table's
// models alone.
func TestPrefixRoutesServeOnlyPricedModels(t *testing.T) {
	s := newStack(t, nil)
	cust, _, key := s.customer(`{"name":"open"}`, `{"name":"k"}`)
	s.refreshKeys()
	before := s.sim.Stats().Requests.Total
	for _, m := range []string{"sim/SIM-PRO", "sim/sim-pro ", "sim/sim-pro-2024-08-06", "sim/sim-unpriced"} {
		if code, errCode, _ := s.chatModel(key, m); code != http.StatusPaymentRequired || errCode != "unpriced_model" {
			t.Fatalf("%q, no price in force: %d %q, want 402 unpriced_model", m, code, errCode)
		}
	}
	if n := s.sim.Stats().Requests.Total - before; n != 0 {
		t.Fatalf("the upstream saw %d requests of refused names", n)
	}
	// GET /v1/models/{id} says the same: not a model until priced.
	req, _ := http.NewRequest("GET", s.gateway+"/v1/models/sim/sim-unpriced", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/models/sim/sim-unpriced: %d, want 404 (chat refuses it)", resp.StatusCode)
	}
	if code, _, id := s.chatModel(key, "sim/sim-pro"); code != http.StatusOK {
		t.Fatalf("sim/sim-pro, a deployment of the table: %d, want 200", code)
	} else if e := s.event(id); e.Model != "sim-pro" || e.Unpriced {
		t.Fatalf("sim/sim-pro recorded as %q (unpriced %v), want the table's priced sim-pro", e.Model, e.Unpriced)
	}

	// A custom price for the customer serves it, priced.
	s.adminDo("POST", "/admin/v1/customers/"+cust+"/overrides",
		`{"model":"sim/sim-pro-2024-08-06","price":{"currency":"USD","input":"1","output":"1"},"effective_from":"2020-01-01T00:00:00Z"}`,
		http.StatusCreated, nil)
	// A price version serves it to everyone.
	s.adminDo("POST", "/admin/v1/prices", `{"model":"sim/sim-unpriced","currency":"USD","input":"2","output":"2","effective_from":"2020-01-01T00:00:00Z"}`,
		http.StatusCreated, nil)
	s.refreshKeys()
	for _, m := range []string{"sim/sim-pro-2024-08-06", "sim/sim-unpriced"} {
		code, _, id := s.chatModel(key, m)
		if code != http.StatusOK {
			t.Fatalf("%q once priced: %d, want 200", m, code)
		}
		if e := s.event(id); e.Unpriced || e.Model != m {
			t.Fatalf("%q once priced: event %+v, want it priced under its name", m, e)
		}
	}

	none := newStack(t, func(c *fileConfig) { c.Providers[0].PrefixRoutes = gateway.PrefixNone })
	_, _, key = none.customer(`{"name":"open"}`, `{"name":"k"}`)
	none.refreshKeys()
	if code, errCode, _ := none.chatModel(key, "sim/sim-unpriced"); code != http.StatusNotFound || errCode != "model_not_found" {
		t.Fatalf("prefix_routes none, a name outside the table: %d %q, want 404 model_not_found", code, errCode)
	}
	if code, _, _ := none.chatModel(key, "sim-pro"); code != http.StatusOK {
		t.Fatalf("prefix_routes none, a model of the table: %d, want 200", code)
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

// TestCurrencyCheckOnAGatewayStartedDuringANATSOutage: a gateway that
// starts while NATS is down checks keys in the ledger but has no price
// book, so it cannot tell a charge's currency: a limited key is refused
// (503 prices_unavailable) before any upstream call, not served
// unchecked. (Found by a review: every model looked unpriced.)
func TestCurrencyCheckOnAGatewayStartedDuringANATSOutage(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	natsDir, addr := t.TempDir(), freeAddr(t)
	ns := natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	_, _, limited := s.customer(`{"name":"euro","currency":"EUR"}`, `{"name":"small","daily_limit":"0.0004"}`)
	s.refreshKeys()
	if code, errCode := s.chatCode(limited); code != http.StatusPaymentRequired || errCode != "currency_mismatch" {
		t.Fatalf("loaded gateway: %d %q, want 402 currency_mismatch", code, errCode)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	g := s.gatewayOnly() // its key cache cannot load: keys are checked in the ledger
	before := s.simStats().Requests.Total
	if code, errCode, _, _ := chatOn(t, g, limited); code != http.StatusServiceUnavailable || errCode != "prices_unavailable" {
		t.Errorf("limited key on a gateway without its price book: %d %q, want 503 prices_unavailable", code, errCode)
	}
	if n := s.simStats().Requests.Total - before; n != 0 {
		t.Errorf("the upstream saw %d requests of the refused key", n)
	}
}

// TestKeyStatesOfAnOlderReleaseAreReadAgain: during a rolling upgrade a
// meter or admin process of the release before publishes a changed key's
// state without currency and spend_limited. The gateway reads such a
// state again from the ledger, so the currency rule still holds. (Found
// by a review.)
func TestKeyStatesOfAnOlderReleaseAreReadAgain(t *testing.T) {
	s := newStack(t, nil)
	_, _, limited := s.customer(`{"name":"euro","currency":"EUR"}`, `{"name":"small","daily_limit":"0.0004"}`)
	prepaid, _, prepaidKey := s.customer(`{"name":"euro-prepaid","currency":"EUR","credit_limit":"0"}`, `{"name":"k"}`)
	s.adminDo("POST", "/admin/v1/customers/"+prepaid+"/credits", `{"amount":"0.0005","allow_sub_minor":true}`, http.StatusCreated, nil)
	s.refreshKeys()
	ctx := t.Context()
	js, err := jetstream.New(s.app.nc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := keys.EnsureBuckets(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{limited, prepaidKey} {
		st, cu, ok, err := s.store.KeyState(ctx, usage.KeyHash(secret))
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		st.Currency, st.SpendLimited, st.Version = "", false, st.Version+1 // the older shape, published later
		data, _ := json.Marshal(st)
		if _, err := b.Keys.Put(ctx, usage.KeyHash(secret), data); err != nil {
			t.Fatal(err)
		}
		cu.CreditLimited, cu.Version = false, cu.Version+1
		data, _ = json.Marshal(cu)
		if _, err := b.Customers.Put(ctx, st.CustomerID, data); err != nil {
			t.Fatal(err)
		}
	}
	s.refreshKeys()
	before := s.simStats().Requests.Total
	for name, k := range map[string]string{"daily-limited EUR key": limited, "prepaid EUR customer's key": prepaidKey} {
		if code, errCode := s.chatCode(k); code != http.StatusPaymentRequired || errCode != "currency_mismatch" {
			t.Errorf("%s, USD-priced model, its state in the older shape: %d %q, want 402 currency_mismatch", name, code, errCode)
		}
	}
	if n := s.simStats().Requests.Total - before; n != 0 {
		t.Errorf("the upstream served %d requests of limited EUR keys on a USD-priced model", n)
	}
}
