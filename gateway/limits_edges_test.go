package gateway_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Spend control and routing edges found by review (each failed before its fix).

// A key whose allowed_models names a model the way clients may ask for it,
// "provider/model", passes the allowlist check of permittedRoute (it
// compares the name as asked) and is then refused by the per-deployment
// filter of prepareAttempts (which compares only the table's name): the
// client gets 400 "no route" for a model its key was explicitly allowed.
func TestAllowedModelsNamedProviderSlashModel(t *testing.T) {
	st := newStack(t, nil)
	keyState := usage.KeyState{CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000a1",
		AllowedModels: []string{"sim/sim-small"}}
	gw := startGateway(t, gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: st.sim.URL + "/v1"}},
		Models:    []gateway.ModelConfig{{Name: "sim-small", Provider: "sim"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{extra: map[string]usage.KeyState{"tg-pm": keyState}},
		Sink: st.sink, Journal: st.journal})
	st.url = "http://" + gw.Addr()
	resp := st.post(t, "/v1/chat/completions", `{"model":"sim/sim-small","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer tg-pm")
	code, body := answer(t, resp)
	if code != http.StatusOK {
		t.Fatalf("model %q with allowed_models [%q]: %d %s; want 200 (the key names exactly this model)",
			"sim/sim-small", "sim/sim-small", code, body)
	}
}

// Two models of the table served by the same deployment (aliases, a common
// config: both go to provider sim, upstream model sim-small). A request
// for "sim/sim-small" is resolved by router.resolve iterating a Go map, so
// which table model it becomes (the model it is recorded and priced under,
// and the one allowed_models is checked against) changes from request to
// request.
func TestProviderSlashModelResolvesToOneTableModel(t *testing.T) {
	st := newStack(t, nil)
	narrow := usage.KeyState{CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000a2",
		AllowedModels: []string{"alias-a"}}
	gw := startGateway(t, gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: st.sim.URL + "/v1"}},
		Models: []gateway.ModelConfig{{Name: "alias-a", Provider: "sim", UpstreamModel: "sim-small"},
			{Name: "alias-b", Provider: "sim", UpstreamModel: "sim-small"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{extra: map[string]usage.KeyState{"tg-narrow": narrow}},
		Sink: st.sink, Journal: st.journal})
	st.url = "http://" + gw.Addr()

	models := map[string]int{}
	codes := map[int]int{}
	for range 40 {
		resp := st.post(t, "/v1/chat/completions", `{"model":"sim/sim-small","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		models[st.sink.event(t, resp.Header.Get("X-Request-Id")).Model]++

		resp = st.post(t, "/v1/chat/completions", `{"model":"sim/sim-small","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`,
			"Authorization", "Bearer tg-narrow")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if len(models) != 1 {
		t.Errorf("40 identical requests for sim/sim-small were recorded (and priced) under %v; want one model", models)
	}
	if len(codes) != 1 {
		t.Errorf("40 identical requests for sim/sim-small with allowed_models [alias-a] were answered %v; want one answer", codes)
	}
}

// tpm_limit: docs/pricing-and-budgets.md says "A tokens-per-minute limit
// admits a request while the minute's tokens are under the limit, so one
// request can take the minute past it; the next is refused." Tokens are
// only counted when a request settles, so a request holds its prompt's
// estimate (its body's bytes / 4) from admission: else a key holding only
// a tpm_limit admits any number of requests sent in parallel, each seeing
// the minute's tokens at 0. A body sent chunked (no Content-Length, as a
// client streaming its body or an HTTP/2 client may) has no length to
// estimate from at admission, and held nothing.
func TestTPMLimitHoldsAgainstParallelRequests(t *testing.T) {
	body := `{"model":"sim-small","stream":true,"max_tokens":8,` +
		`"messages":[{"role":"user","content":"tell me a long story please"}],"metadata":{"sim_delay_ms":"100"}}`
	for i, tc := range []struct {
		name string
		body func() io.Reader
	}{
		{"with a Content-Length", func() io.Reader { return strings.NewReader(body) }},
		{"chunked", func() io.Reader { return io.MultiReader(strings.NewReader(body)) }}, // its length hidden from net/http
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newKeyStack(t, map[string]usage.KeyState{
				"tg-tpm": {CustomerID: testCustomer, KeyID: fmt.Sprintf("0197a3c2-0000-7000-8000-0000000000b%d", i), TPMLimit: 10},
			})
			const n = 8
			var wg sync.WaitGroup
			var mu sync.Mutex
			admitted := 0
			var tokens int64
			for range n {
				wg.Go(func() {
					req, _ := http.NewRequest(http.MethodPost, st.url+"/v1/chat/completions", tc.body())
					req.Header.Set("Authorization", "Bearer tg-tpm")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "[DONE]") {
						e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
						mu.Lock()
						admitted++
						tokens += e.Usage.Total()
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			// Each request uses more than the whole limit (10 tokens): by the
			// documented rule, one request may take the minute past it, no more.
			if admitted > 1 {
				t.Fatalf("tpm_limit 10: %d of %d parallel requests admitted, %d tokens in the minute; want at most 1 request",
					admitted, n, tokens)
			}
		})
	}
}

// TestChunkedBodiesCountAgainstMaxConcurrent: under a tpm_limit a body sent
// chunked is read into memory before admission (its estimate needs its
// length), and max_concurrent counted a request only from its admission:
// a key limited to one request at a time could have any number of bodies,
// each up to max_request_bytes, held in the gateway's memory at once. Now
// a body being read counts: while one is, a second chunked body of the
// key, or a request with a Content-Length (found by review: admission
// looked at the key's open requests alone), is refused, 429 concurrency.
func TestChunkedBodiesCountAgainstMaxConcurrent(t *testing.T) {
	body := `{"model":"sim-small","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	for i, tc := range []struct {
		name   string
		second func() io.Reader
	}{
		{"chunked", func() io.Reader { return io.MultiReader(strings.NewReader(body)) }}, // its length hidden from net/http
		{"with a length", func() io.Reader { return strings.NewReader(body) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newKeyStack(t, map[string]usage.KeyState{
				"tg-one": {CustomerID: testCustomer, KeyID: fmt.Sprintf("0197a3c2-0000-7000-8000-0000000000c%d", i), TPMLimit: 1_000_000, MaxConcurrent: 1},
			})
			post := func(r io.Reader) (int, string, http.Header) {
				req, _ := http.NewRequest(http.MethodPost, st.url+"/v1/chat/completions", r)
				req.Header.Set("Authorization", "Bearer tg-one")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0, err.Error(), nil
				}
				status, got := answer(t, resp)
				return status, got, resp.Header
			}
			// The first body: half sent, then held open while the gateway reads it.
			pr, pw := io.Pipe()
			first := make(chan int, 1)
			go func() { status, _, _ := post(pr); first <- status }()
			if _, err := io.WriteString(pw, body[:20]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			status, got, h := post(tc.second())
			io.WriteString(pw, body[20:])
			pw.Close()
			if status != http.StatusTooManyRequests || !strings.Contains(got, "concurrent") || h.Get("Retry-After") == "" {
				t.Errorf("a second request while a chunked body of the key (max_concurrent 1) is read: %d %s; want 429 (concurrency) with Retry-After", status, got)
			}
			if code := <-first; code != http.StatusOK {
				t.Errorf("the first request = %d, want 200 once its body is whole", code)
			}
		})
	}
}

// The Responses API's background mode ("background": true) answers at once
// with a queued response, no usage in it, and runs the model afterwards on
// the operator's upstream account: the gateway meters only the queued
// answer (an estimate of the prompt, no output), so the generation is never
// billed and no spend limit, credit limit, tpm_limit or max_concurrent
// holds it (its request ended when the queued answer came). A key could
// have the upstream generate without bound, unbilled. Such a request is
// refused (400) before any upstream call; so is a background flag spelled
// ambiguously.
func TestResponsesBackgroundModeRefused(t *testing.T) {
	up, upstreamBodies := recordingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"id":"resp_1","object":"response","status":"queued","background":true,"model":"sim-small","output":[],"usage":null}`)
	})
	st := newStack(t, nil)
	gw := startGateway(t, gateway.Config{
		Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: up.URL + "/v1"}},
		Models:    []gateway.ModelConfig{{Name: "sim-small", Provider: "sim"}},
	}, gateway.Deps{Providers: providers(), Keys: keys{extra: map[string]usage.KeyState{
		"tg-capped": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000e1", MaxConcurrent: 1, TPMLimit: 1000},
	}}, Sink: st.sink, Journal: st.journal})
	st.url = "http://" + gw.Addr()
	for _, body := range []string{
		`{"model":"sim-small","input":"write a novel","max_output_tokens":100000,"background":true}`,
		`{"model":"sim-small","input":"write a novel","stream":true,"background":true}`,
		`{"model":"sim-small","input":"write a novel","background":false,"background":true}`,
		`{"model":"sim-small","input":"write a novel","Background":true}`,
		`{"model":"sim-small","input":"write a novel","backgroun\u0064":true}`,
	} {
		resp := st.post(t, "/v1/responses", body, "Authorization", "Bearer tg-capped")
		code, got := answer(t, resp)
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d %.200s; want 400 (a background response runs unmetered)", body, code, got)
		}
	}
	if got := upstreamBodies(); len(got) != 0 {
		t.Errorf("the upstream got %d background requests: %q", len(got), got)
	}
}

// recordingUpstream is a JSON upstream answering with answer, and what
// returns the bodies of the requests it got so far.
func recordingUpstream(t *testing.T, answer http.HandlerFunc) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var bodies []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		answer(w, r)
	}))
	t.Cleanup(up.Close)
	return up, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

// TestServiceTiersOtherThanStandardRefused: service_tier passed upstream
// unchecked, and OpenAI bills "priority" at about twice the standard
// price and "flex" at about half, while the price book holds one price per
// model: a client could buy priority processing billed at the standard
// price. (Found by an attacker's review.) A tier other than the standard
// one ("auto", "default", or none) is refused (400, naming service_tier)
// before any upstream call, on chat completions and the Responses API;
// so is one spelled ambiguously. The standard tier passes.
func TestServiceTiersOtherThanStandardRefused(t *testing.T) {
	up, upstreamBodies := recordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/responses") {
			io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","model":"m","output":[],"usage":{"input_tokens":3,"output_tokens":1}}`)
			return
		}
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	})
	st := newStack(t, oneUpstream(up.URL))
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"priority"}`, http.StatusBadRequest},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"flex"}`, http.StatusBadRequest},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":7}`, http.StatusBadRequest},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"auto","Service_tier":"priority"}`, http.StatusBadRequest},
		{"/v1/responses", `{"model":"m","input":"hi","service_tier":"priority"}`, http.StatusBadRequest},
		{"/v1/responses", `{"model":"m","input":"hi","ſervice_tier":"priority"}`, http.StatusBadRequest},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":"auto"}`, http.StatusOK},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"service_tier":null}`, http.StatusOK},
		{"/v1/responses", `{"model":"m","input":"hi","service_tier":"default"}`, http.StatusOK},
	} {
		resp := st.post(t, c.path, c.body, "Authorization", "Bearer "+testKey)
		code, got := answer(t, resp)
		if code != c.want || c.want == http.StatusBadRequest && !strings.Contains(got, "service_tier") {
			t.Errorf("%s %s: %d %.300s; want %d", c.path, c.body, code, got, c.want)
		}
	}
	if got := upstreamBodies(); len(got) != 3 {
		t.Errorf("the upstream got %d requests, want the 3 at the standard tier: %q", len(got), got)
	}
}

// TestPremiumPricedOptionsRefused: options a provider bills at other rates
// than the standard ones went upstream and were billed at the price
// book's one price per model (found by review): OpenAI's audio output and
// input (audio tokens at several times the text rates), Anthropic's fast
// mode (speed "fast"), inference_geo "us", the 1M-context beta and the
// 1-hour prompt cache (cache_control ttl "1h", escaped too). They
// are refused with 400, as service_tier "priority" is, before any upstream
// request; the standard values, and text that merely names them, pass.
func TestPremiumPricedOptionsRefused(t *testing.T) {
	st := newStack(t, nil)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		path, body, header, want string // want: "" for 200, else what the 400 names
	}{
		{"/v1/chat/completions", `{"model":"sim-pro",` + msgs + `,"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}}`, "", "modalities"},
		{"/v1/chat/completions", `{"model":"sim-pro",` + msgs + `,"audio":{"voice":"alloy"}}`, "", "audio"},
		{"/v1/chat/completions", `{"model":"sim-pro","messages":[{"role":"user","content":[{"type":"text","text":"transcribe"},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "", "messages[0].content[1]"},
		{"/v1/chat/completions", `{"model":"sim-pro",` + msgs + `,"Modalities":["audio"]}`, "", "Modalities"},
		{"/v1/chat/completions", `{"model":"sim-pro",` + msgs + `,"modalities":["text","\u0061udio"]}`, "", "modalities"},
		{"/v1/chat/completions", `{"model":"sim-pro","messages":[{"role":"user","content":[{"type":"input\u005faudio","input\u005faudio":{"data":"AAAA","format":"wav"}}]}]}`, "", "messages[0].content[0]"},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,` + msgs + `,"speed":"fast"}`, "", `speed \"fast\"`},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,` + msgs + `,"inference_geo":"us"}`, "", `inference_geo \"us\"`},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,` + msgs + `,"speed":"standard","Speed":"fast"}`, "", "Speed"},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,` + msgs + `}`, "fine-grained-tool-streaming-2025-05-14, context-1m-2025-08-07", "context-1m-2025-08-07"},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,"system":[{"type":"text","text":"big","cache_control":{"type":"ephemeral","ttl":"1h"}}],` + msgs + `}`, "", `ttl \"1h\"`},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","t\u0074l":"1h"}}]}]}`, "", `ttl \"1h\"`},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,` + msgs + `,"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"60m"}}]}`, "", `ttl \"60m\"`},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,"tools":[{"name":"x","input_schema":{"type":"object","maximum":1e400}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`, "", `ttl \"1h\"`},
		{"/v1/chat/completions", `{"model":"sim-pro",` + msgs + `,"modalities":["text"],"audio":null}`, "", ""},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,"system":[{"type":"text","text":"what is a ttl?","cache_control":{"type":"ephemeral","ttl":"5m"}}],` + msgs + `}`, "", ""},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"cache_control":{"ttl":"1h"}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}`, "", ""},
		{"/anthropic/v1/messages/count_tokens", `{"model":"claude-sim","system":[{"type":"text","text":"big","cache_control":{"type":"ephemeral","ttl":"1h"}}],` + msgs + `}`, "", ""},
		{"/v1/chat/completions", `{"model":"sim-pro","messages":[{"role":"user","content":"what is \"input_audio\" in the API?"}]}`, "", ""},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":5,` + msgs + `,"speed":"standard","inference_geo":"global"}`, "fine-grained-tool-streaming-2025-05-14", ""},
	} {
		hdr := []string{"Authorization", "Bearer " + testKey}
		if c.header != "" {
			hdr = append(hdr, "anthropic-beta", c.header)
		}
		code, got := answer(t, st.post(t, c.path, c.body, hdr...))
		switch {
		case c.want == "" && code != http.StatusOK:
			t.Errorf("%s %s: %d %.300s; want 200", c.path, c.body, code, got)
		case c.want != "" && (code != http.StatusBadRequest || !strings.Contains(got, c.want)):
			t.Errorf("%s %s: %d %.300s; want 400 naming %s", c.path, c.body, code, got, c.want)
		}
	}
	if n := st.sink.count(); n != 5 {
		t.Errorf("%d events, want the 5 requests served (count_tokens makes none)", n)
	}
}

// TestCacheTTLSpelledTwiceRefused: the 1-hour cache check read a
// cache_control as encoding/json does, its last ttl and its last
// cache_control winning, and passed the body on unchanged: a top-level
// cache_control (automatic caching) with "ttl":"1h","ttl":"5m", or a
// "1h" one followed by another without a ttl, passed as the 5-minute
// cache, for an upstream that reads the first to write the 1-hour cache
// at twice the input price, billed at the price book's 5-minute
// cache_write (found by a hostile client's review). Such spellings are
// refused (400); one cache_control of "5m" passes.
func TestCacheTTLSpelledTwiceRefused(t *testing.T) {
	st := newStack(t, nil)
	const head = `{"model":"claude-sim","max_tokens":5,"messages":[{"role":"user","content":"hi"}],`
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{head + `"cache_control":{"type":"ephemeral","ttl":"1h","ttl":"5m"}}`, false},
		{head + `"cache_control":{"type":"ephemeral","ttl":"1h"},"cache_control":{"type":"ephemeral"}}`, false},
		{head + `"cache_control":{"type":"ephemeral","TTL":"1h","ttl":"5m"}}`, false},
		{head + `"cache_control":{"type":"ephemeral","ttl":"5m"}}`, true},
	} {
		code, got := answer(t, st.post(t, "/anthropic/v1/messages", c.body))
		switch {
		case c.ok && code != http.StatusOK:
			t.Errorf("%s: %d %.300s; want 200", c.body, code, got)
		case !c.ok && code != http.StatusBadRequest:
			t.Errorf("%s: %d %.300s; want 400", c.body, code, got)
		}
	}
	if n := st.sink.count(); n != 1 {
		t.Errorf("%d events, want the 1 request served", n)
	}
}

// TestRequestsRefusedWhileTheJournalCannotWrite: with its data disk full,
// the gateway went on serving requests whose crash journal records and
// final events could not be written, lost to a kill or a shutdown (found
// by review: 30 streams served and 0 in the ledger). While the journal
// says it cannot write, a new request is refused with 503
// metering_unavailable before any upstream request, and served again once
// it can.
func TestRequestsRefusedWhileTheJournalCannotWrite(t *testing.T) {
	st := newStack(t, nil)
	const body = `{"model":"sim-pro","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`
	st.journal.setFailing(errors.New("journal: write journal/00000000000000000001.seg: no space left on device"))
	code, got := answer(t, st.post(t, "/v1/chat/completions", body, "Authorization", "Bearer "+testKey))
	if code != http.StatusServiceUnavailable || !strings.Contains(got, "metering_unavailable") || !strings.Contains(got, "no space left") {
		t.Fatalf("a request while the journal cannot write: %d %s; want 503 metering_unavailable saying why", code, got)
	}
	if n := st.sink.count(); n != 0 {
		t.Fatalf("%d events for the refused request, want none: it never went upstream", n)
	}
	st.journal.setFailing(nil)
	if code, got := answer(t, st.post(t, "/v1/chat/completions", body, "Authorization", "Bearer "+testKey)); code != http.StatusOK {
		t.Fatalf("a request once the journal writes again: %d %s", code, got)
	}
}

// TestStreamWithholdsItsEndWhenItsEventIsNotDurable: with the event
// stream down and the crash journal's disk full while a stream was in
// flight, the client still got its usage and the end of the stream for an
// event held in memory alone, lost to a kill (a crash review: 10 streams
// ended with [DONE], their events recovered only as estimates). "Durable
// before done": the usage and the end are withheld; a chat stream gets an
// error in their place, a native stream is broken off.
func TestStreamWithholdsItsEndWhenItsEventIsNotDurable(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		if strings.HasSuffix(r.URL.Path, "/messages") {
			io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"+
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n")
			f.Flush()
			<-release
			usage := `{"output_tokens":5}`
			if strings.Contains(string(req), "claude-nofinal") { // no final report: the end is what is held back
				usage = `{"output_tokens":null}`
			}
			delta := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":" + usage + "}\n\n"
			if strings.Contains(string(req), "claude-broken") { // the final report, then the connection breaks
				io.WriteString(w, delta)
				f.Flush()
				panic(http.ErrAbortHandler)
			}
			io.WriteString(w, delta+"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			return
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"}}]}`+"\n\n")
		f.Flush()
		<-release
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "op", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k"},
			gateway.ProviderConfig{Name: "ap", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "k"})
		c.Models = append(c.Models, gateway.ModelConfig{Name: "om", Provider: "op", UpstreamModel: "gpt-x"},
			gateway.ModelConfig{Name: "cl", Provider: "ap", UpstreamModel: "claude-x"},
			gateway.ModelConfig{Name: "cl-nofinal", Provider: "ap", UpstreamModel: "claude-nofinal"},
			gateway.ModelConfig{Name: "cl-broken", Provider: "ap", UpstreamModel: "claude-broken"})
	})
	for _, c := range []struct{ path, body, end string }{
		{"/v1/chat/completions", `{"model":"om","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "[DONE]"},
		{"/anthropic/v1/messages", `{"model":"cl","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, "message_delta"},
		{"/anthropic/v1/messages", `{"model":"cl-nofinal","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, "message_stop"},
		{"/anthropic/v1/messages", `{"model":"cl-broken","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, "message_delta"},
	} {
		release = make(chan struct{})
		st.journal.setFailing(nil)
		st.sink.setFail(nil)
		resp := st.post(t, c.path, c.body)
		buf := make([]byte, 64)
		if _, err := io.ReadAtLeast(resp.Body, buf, 1); err != nil { // the stream is under way
			t.Fatal(err)
		}
		diskFull := errors.New("journal: write: no space left on device")
		st.journal.setFailing(diskFull)
		st.sink.setFail(errors.New("nats: no responders; spool: no space left on device"))
		close(release)
		rest, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := string(buf) + string(rest)
		if strings.Contains(got, c.end) || strings.Contains(got, `"completion_tokens":5`) || strings.Contains(got, `"output_tokens":5`) {
			t.Errorf("%s: the client got the usage or the end of a stream whose event is in memory alone:\n%s", c.path, got)
		}
		if c.path == "/v1/chat/completions" && !strings.Contains(got, "metering_unavailable") {
			t.Errorf("%s: no error in place of the end:\n%s", c.path, got)
		}
	}
}

// A key refused for its daily or monthly spend limit was told only which
// limit ("this API key has reached its daily spend limit"), never when it
// may spend again, though the gateway holds that time (BlockedUntil, the
// start of the next UTC day or month): a client could only poll. The 402
// now names the moment the limit resets, in UTC; a limit of 0 and an
// exhausted credit, which no time lifts, name none.
func TestSpendLimitRefusalSaysWhenItResets(t *testing.T) {
	tomorrow := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	past := time.Now().Add(-time.Second)
	st := newKeyStack(t, map[string]usage.KeyState{
		"tg-daily": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000b1",
			Blocked: "this API key has reached its daily spend limit", BlockedUntil: &tomorrow, SpendLimited: true},
		"tg-frozen": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000b2",
			Blocked: "this API key's daily spend limit is 0: it may spend nothing until the limit is raised", SpendLimited: true},
		"tg-reset": {CustomerID: testCustomer, KeyID: "0197a3c2-0000-7000-8000-0000000000b3",
			Blocked: "this API key has reached its daily spend limit", BlockedUntil: &past, SpendLimited: true},
	})
	var retryAfter string
	chat := func(key string) (int, string) {
		resp := st.post(t, "/v1/chat/completions", `{"model":"sim-small","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+key)
		retryAfter = resp.Header.Get("Retry-After")
		return answer(t, resp)
	}
	asked := time.Now()
	code, body := chat("tg-daily")
	// Retry-After: the seconds until the limit resets, rounded up.
	secs, err := strconv.ParseInt(retryAfter, 10, 64)
	if until := tomorrow.Sub(asked); err != nil || secs < int64(until/time.Second)-5 || secs > int64(until/time.Second)+1 {
		t.Errorf("daily limit reached: Retry-After %q; want the seconds until %s (%.0f)", retryAfter, tomorrow.Format(time.RFC3339), until.Seconds())
	}
	var env struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("daily limit reached: %d %s: %v", code, body, err)
	}
	want := "this API key has reached its daily spend limit; it resets at " + tomorrow.Format(time.RFC3339)
	if code != http.StatusPaymentRequired || env.Error.Code != "insufficient_quota" || !strings.HasPrefix(env.Error.Message, want) {
		t.Errorf("daily limit reached: %d %s; want 402 insufficient_quota saying %q", code, body, want)
	}
	if code, body := chat("tg-frozen"); code != http.StatusPaymentRequired || strings.Contains(body, "resets at") || retryAfter != "" {
		t.Errorf("limit of 0: %d %s, Retry-After %q; want 402 naming no reset, and no Retry-After", code, body, retryAfter)
	}
	if code, body := chat("tg-reset"); code != http.StatusOK {
		t.Errorf("daily limit reached yesterday, a new day now: %d %s; want 200", code, body)
	}
}
