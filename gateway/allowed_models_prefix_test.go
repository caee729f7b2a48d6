package gateway_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A key's allowed_models names models whole: a key allowed "sim-pro" may
// not use "sim-pro-max", a model whose name merely starts with it (as
// "gpt-4o" is a prefix of "gpt-4o-long" and of pricier models named
// after it). A mutation audit: allowedModel comparing by prefix passed
// every test.
func TestAllowedModelsAreWholeNames(t *testing.T) {
	st := newStack(t, nil)
	gw, err := gateway.New(gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: st.sim.URL + "/v1"}},
		Models: []gateway.ModelConfig{{Name: "sim-pro", Provider: "sim"},
			{Name: "sim-pro-max", Provider: "sim", UpstreamModel: "sim-pro"}},
	}, gateway.Deps{Providers: providers(), Sink: st.sink, Journal: st.journal, Keys: keys{extra: map[string]usage.KeyState{
		"tg-pro-only": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000a1", AllowedModels: []string{"sim-pro"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Stop(t.Context()) })
	st.gw, st.url = gw, "http://"+gw.Addr()
	chat := func(model string) (int, string) {
		return answer(t, st.post(t, "/v1/chat/completions", `{"model":"`+model+`","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer tg-pro-only"))
	}
	if code, body := chat("sim-pro"); code != 200 {
		t.Fatalf("the allowed model: %d %s", code, body)
	}
	if code, body := chat("sim-pro-max"); code != 403 {
		t.Errorf("a model whose name starts with the allowed one: %d %s, want 403 model_not_allowed", code, body)
	}
}
