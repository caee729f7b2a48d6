package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestUpstreamModelFallbacksRefused: a request member that has the
// upstream serve other models than the one it was sent went upstream as
// the client wrote it (found by a hostile client's review): Anthropic's
// server-side fallback ("fallbacks": "default" or [{"model": …}], beta
// server-side-fallback-2026-06-01) and OpenRouter's "models" and
// "fallbacks" lists retry the request on another model within one round
// trip, and the provider bills the model that served. A key allowed only
// a cheap model was served an expensive one, billed at the cheap model's
// price, past its allowed_models (the upstream here serves the fallback,
// as those do). Such a request is refused (400, naming the member) before
// any upstream request, on every route that passes the body on; so is the
// member spelled ambiguously. null, and Anthropic's "off", pass.
func TestUpstreamModelFallbacksRefused(t *testing.T) {
	up, upstreamBodies := recordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"opus-upstream","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","model":"opus-upstream","output":[],"usage":{"input_tokens":3,"output_tokens":1}}`)
		case strings.HasSuffix(r.URL.Path, "/completions") && !strings.HasSuffix(r.URL.Path, "/chat/completions"):
			io.WriteString(w, `{"id":"c","object":"text_completion","created":1,"model":"opus-upstream","choices":[{"index":0,"text":"hi","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		default:
			io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"opus-upstream","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		}
	})
	st := newStack(t, nil)
	gw := startGateway(t, gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "or", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-or-123456789"},
			{Name: "ant", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789"},
		},
		Models: []gateway.ModelConfig{
			{Name: "cheap", Provider: "or", UpstreamModel: "cheap-upstream"},
			{Name: "claude-cheap", Provider: "ant", UpstreamModel: "haiku-upstream"},
		},
	}, gateway.Deps{Providers: providers(), Keys: keys{extra: map[string]usage.KeyState{
		"tg-cheap": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000f1", AllowedModels: []string{"cheap", "claude-cheap"}},
	}}, Sink: st.sink, Journal: st.journal})
	st.url = "http://" + gw.Addr()
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const beta = "server-side-fallback-2026-06-01"
	served := 0
	for _, c := range []struct {
		path, body, want string // want: what the 400 names, "" for 200
	}{
		{"/anthropic/v1/messages", `{"model":"claude-cheap","max_tokens":5,` + msgs + `,"fallbacks":[{"model":"opus-upstream"}]}`, "fallbacks"},
		{"/anthropic/v1/messages", `{"model":"claude-cheap","max_tokens":5,` + msgs + `,"fallbacks":"default"}`, "fallbacks"},
		{"/anthropic/v1/messages", `{"model":"claude-cheap","max_tokens":5,"stream":true,` + msgs + `,"fallbacks":[{"model":"opus-upstream"}]}`, "fallbacks"},
		{"/anthropic/v1/messages", `{"model":"claude-cheap","max_tokens":5,` + msgs + `,"Fallbacks":"default"}`, "Fallbacks"},
		{"/anthropic/v1/messages", `{"model":"claude-cheap","max_tokens":5,` + msgs + `,"fallbacks":"off","f\u0061llbacks":"default"}`, "fallbacks"},
		{"/v1/chat/completions", `{"model":"cheap",` + msgs + `,"models":["cheap-upstream","opus-upstream"]}`, "models"},
		{"/v1/chat/completions", `{"model":"cheap",` + msgs + `,"fallbacks":[{"model":"opus-upstream"}]}`, "fallbacks"},
		{"/v1/chat/completions", `{"model":"cheap",` + msgs + `,"Models":["opus-upstream"]}`, "Models"},
		{"/v1/completions", `{"model":"cheap","prompt":"hi","models":["opus-upstream"]}`, "models"},
		{"/v1/responses", `{"model":"cheap","input":"hi","models":["opus-upstream"]}`, "models"},
		{"/v1/responses", `{"model":"cheap","input":"hi","fallbacks":[{"model":"opus-upstream"}]}`, "fallbacks"},
		{"/anthropic/v1/messages", `{"model":"claude-cheap","max_tokens":5,` + msgs + `,"fallbacks":"off"}`, ""},
		{"/anthropic/v1/messages", `{"model":"claude-cheap","max_tokens":5,` + msgs + `,"fallbacks":null}`, ""},
		{"/v1/chat/completions", `{"model":"cheap",` + msgs + `,"models":null}`, ""},
		{"/v1/responses", `{"model":"cheap","input":"hi"}`, ""},
	} {
		resp := st.post(t, c.path, c.body, "Authorization", "Bearer tg-cheap", "anthropic-beta", beta)
		code, got := answer(t, resp)
		switch {
		case c.want == "" && code != http.StatusOK:
			t.Errorf("%s %s: %d %.300s; want 200", c.path, c.body, code, got)
		case c.want != "" && (code != http.StatusBadRequest || !strings.Contains(got, c.want)):
			t.Errorf("%s %s: %d %.300s; want 400 naming %s", c.path, c.body, code, got, c.want)
		}
		if c.want == "" {
			served++
		}
	}
	if got := upstreamBodies(); len(got) != served {
		t.Errorf("the upstream got %d requests, want the %d without fallback models: %q", len(got), served, got)
	}
	if n := st.sink.count(); n != served {
		t.Errorf("%d events, want %d", n, served)
	}
}

// TestAnthropicAdvisorToolRefused: Anthropic's advisor tool
// ({"type":"advisor_20260301","name":"advisor","model":…}, beta
// advisor-tool-2026-03-01) has the executor model consult another, stronger
// model server-side within the request, billed at that model's rates and
// reported among usage.iterations[], which the gateway sums and prices as
// the model routed: a key allowed only a cheap model had an expensive one
// generate, billed at the cheap one's price (found by a hostile client's
// review). A tool that runs a model of its own (an advisor type, or a tool
// naming a model) is refused (400) before any upstream request; so is one
// spelled so that parsers may read it differently. Ordinary tools pass.
func TestAnthropicAdvisorToolRefused(t *testing.T) {
	up, upstreamBodies := recordingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"haiku-upstream","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",`+
			`"usage":{"input_tokens":3,"output_tokens":1,"iterations":[{"type":"message","input_tokens":3,"output_tokens":1},{"type":"advisor_message","model":"opus-upstream","input_tokens":900,"output_tokens":1700}]}}`)
	})
	st := newStack(t, nil)
	gw := startGateway(t, gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "ant", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-123456789"}},
		Models:    []gateway.ModelConfig{{Name: "claude-cheap", Provider: "ant", UpstreamModel: "haiku-upstream"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{extra: map[string]usage.KeyState{
		"tg-cheap": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000f2", AllowedModels: []string{"claude-cheap"}},
	}}, Sink: st.sink, Journal: st.journal})
	st.url = "http://" + gw.Addr()
	const head = `{"model":"claude-cheap","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[`
	const fn = `{"name":"f","description":"a tool","input_schema":{"type":"object","properties":{"model":{"type":"string"},"Model":{"type":"string"}}}}`
	served := 0
	for _, c := range []struct {
		tools string
		ok    bool
	}{
		{`{"type":"advisor_20260301","name":"advisor","model":"opus-upstream"}`, false},
		{fn + `,{"type":"advisor_20260301","name":"advisor"}`, false},
		{`{"type":"advisor_20260301","name":"advisor","type":"custom","input_schema":{"type":"object"}}`, false},
		{`{"name":"advisor","model":"opus-upstream","input_schema":{"type":"object"}}`, false},
		{`{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h","ttl":"5m"}}`, false},
		{fn, true},
		{fn + `,{"type":"web_search_20250305","name":"web_search","max_uses":1}`, true},
	} {
		body := head + c.tools + `]}`
		code, got := answer(t, st.post(t, "/anthropic/v1/messages", body, "Authorization", "Bearer tg-cheap"))
		switch {
		case c.ok && code != http.StatusOK:
			t.Errorf("%s: %d %.300s; want 200", body, code, got)
		case !c.ok && code != http.StatusBadRequest:
			t.Errorf("%s: %d %.300s; want 400", body, code, got)
		}
		if c.ok {
			served++
		}
	}
	if got := upstreamBodies(); len(got) != served {
		t.Errorf("the upstream got %d requests, want the %d without a tool running another model: %q", len(got), served, got)
	}
}
