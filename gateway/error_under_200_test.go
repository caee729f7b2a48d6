package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// An upstream that answers 200 with an error (its body an error object,
// or its stream's first event an error frame) used to reach the client as
// the answer: no failover, and its deployment's health untouched. Before
// the client has a byte of it, a failure of the provider's side now fails
// over, as a 5xx does, and cools its deployment down; an error of the
// client's side (invalid_request_error, a 4xx code) does not.

// errorAnswer is an upstream answer: its Content-Type and body, 200.
type errorAnswer struct{ contentType, body string }

// flakyStack is a gateway over upstream-sim and one more upstream that
// answers every request with a (a count of its requests in *hits): the
// models flaky (OpenAI-compatible), claude-flaky (Anthropic) and
// gemini-flaky (Gemini) have their one deployment there ("bad-openai",
// "bad-anthropic", "bad-gemini"), and fall back to upstream-sim's model of
// their type. A failed deployment rests an hour.
func flakyStack(t *testing.T, a errorAnswer, edit func(*gateway.Config)) (*stack, *atomic.Int64) {
	t.Helper()
	return refusingStack(t, http.StatusOK, a, edit)
}

// refusingStack is flakyStack with the bad upstream answering status: an
// answer with no content type is sent with no Content-Type header at all
// (not one net/http sniffed).
func refusingStack(t *testing.T, status int, a errorAnswer, edit func(*gateway.Config)) (*stack, *atomic.Int64) {
	t.Helper()
	hits := new(atomic.Int64)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.ReadAll(r.Body)
		if a.contentType == "" {
			w.Header()["Content-Type"] = nil
		} else {
			w.Header().Set("Content-Type", a.contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(bad.Close)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers,
			gateway.ProviderConfig{Name: "bad-openai", Type: "openai", BaseURL: bad.URL + "/v1"},
			gateway.ProviderConfig{Name: "bad-anthropic", Type: "anthropic", BaseURL: bad.URL + "/v1"},
			gateway.ProviderConfig{Name: "bad-gemini", Type: "gemini", BaseURL: bad.URL + "/v1beta"})
		c.Models = append(c.Models,
			gateway.ModelConfig{Name: "flaky", Deployments: []gateway.DeploymentConfig{
				{Name: "bad-openai", Provider: "bad-openai", UpstreamModel: "sim-small"}}, Fallbacks: []string{"sim-small"}},
			gateway.ModelConfig{Name: "claude-flaky", Deployments: []gateway.DeploymentConfig{
				{Name: "bad-anthropic", Provider: "bad-anthropic", UpstreamModel: "sim-pro"}}, Fallbacks: []string{"claude-sim"}},
			gateway.ModelConfig{Name: "gemini-flaky", Deployments: []gateway.DeploymentConfig{
				{Name: "bad-gemini", Provider: "bad-gemini", UpstreamModel: "sim-pro"}}, Fallbacks: []string{"gemini-sim"}})
		c.Retry.Cooldown = time.Hour
		if edit != nil {
			edit(c)
		}
	})
	return st, hits
}

// errorUnder200Request is a request to the gateway: path, body, and the
// headers of the key.
type errorUnder200Request struct {
	path, body string
	header     []string
}

var (
	overloadedChat      = `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`
	overloadedAnthropic = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	overloadedGemini    = `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`
	overloadedResponses = `{"type":"error","code":"server_error","message":"overloaded","param":null,"sequence_number":0}`

	chatStreamOf = func(model string) errorUnder200Request {
		return errorUnder200Request{"/v1/chat/completions", `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hi there"}]}`, nil}
	}
	chatBodyOf = func(model string) errorUnder200Request {
		return errorUnder200Request{"/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"hi there"}]}`, nil}
	}
	anthropicStream = errorUnder200Request{"/anthropic/v1/messages",
		`{"model":"claude-flaky","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi there"}]}`, []string{"x-api-key", testKey}}
	anthropicBody = errorUnder200Request{"/anthropic/v1/messages",
		`{"model":"claude-flaky","max_tokens":9,"messages":[{"role":"user","content":"hi there"}]}`, []string{"x-api-key", testKey}}
	geminiStream = errorUnder200Request{"/gemini/v1beta/models/gemini-flaky:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"hi there"}]}]}`, []string{"x-goog-api-key", testKey}}
	geminiBody = errorUnder200Request{"/gemini/v1beta/models/gemini-flaky:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi there"}]}]}`, []string{"x-goog-api-key", testKey}}
	responsesStream = errorUnder200Request{"/v1/responses", `{"model":"flaky","stream":true,"input":"hi there"}`, nil}
	responsesBody   = errorUnder200Request{"/v1/responses", `{"model":"flaky","input":"hi there"}`, nil}
	embeddingsBody  = errorUnder200Request{"/v1/embeddings", `{"model":"flaky","input":"hi there"}`, nil}
)

func sseOf(frames ...string) errorAnswer {
	return errorAnswer{"text/event-stream", strings.Join(frames, "\n\n") + "\n\n"}
}

func jsonOf(body string) errorAnswer { return errorAnswer{"application/json", body} }

// send posts q and returns the status, the body and the request's id.
func (st *stack) send(t *testing.T, q errorUnder200Request) (int, string, string) {
	t.Helper()
	resp := st.post(t, q.path, q.body, q.header...)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), resp.Header.Get("X-Request-Id")
}

func TestAServerErrorUnderA200FailsOver(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer errorAnswer
		req    errorUnder200Request
		bad    string // the deployment that failed
	}{
		{"chat stream, error frame first", sseOf("data: "+overloadedChat, "data: [DONE]"), chatStreamOf("flaky"), "bad-openai"},
		{"chat stream, event: error first", sseOf("event: error\ndata: " + overloadedChat), chatStreamOf("flaky"), "bad-openai"},
		{"chat stream, a JSON error body", jsonOf(overloadedChat), chatStreamOf("flaky"), "bad-openai"},
		{"chat body", jsonOf(overloadedChat), chatBodyOf("flaky"), "bad-openai"},
		{"chat stream from Anthropic", sseOf("event: error\ndata: " + overloadedAnthropic), chatStreamOf("claude-flaky"), "bad-anthropic"},
		{"chat stream from Gemini", sseOf("data: " + overloadedGemini), chatStreamOf("gemini-flaky"), "bad-gemini"},
		{"chat body from Anthropic", jsonOf(overloadedAnthropic), chatBodyOf("claude-flaky"), "bad-anthropic"},
		{"anthropic stream", sseOf("event: error\ndata: " + overloadedAnthropic), anthropicStream, "bad-anthropic"},
		{"anthropic body", jsonOf(overloadedAnthropic), anthropicBody, "bad-anthropic"},
		{"gemini stream", sseOf("data: " + overloadedGemini), geminiStream, "bad-gemini"},
		{"gemini body", jsonOf(overloadedGemini), geminiBody, "bad-gemini"},
		{"responses stream", sseOf("event: error\ndata: " + overloadedResponses), responsesStream, "bad-openai"},
		// The events before output are held, so that an error after them
		// fails over too (Anthropic's usual overload comes after
		// message_start).
		{"anthropic stream, after message_start and a ping", sseOf(strings.TrimSpace(anthStart(1)), "event: ping\ndata: {\"type\":\"ping\"}", "event: error\ndata: "+overloadedAnthropic), anthropicStream, "bad-anthropic"},
		{"chat stream from Anthropic, after message_start", sseOf(strings.TrimSpace(anthStart(1)), "event: error\ndata: "+overloadedAnthropic), chatStreamOf("claude-flaky"), "bad-anthropic"},
		{"responses stream, after response.created", sseOf(`event: response.created`+"\n"+`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
			"event: error\ndata: "+overloadedResponses), responsesStream, "bad-openai"},
		{"responses body", jsonOf(overloadedChat), responsesBody, "bad-openai"},
		{"embeddings", jsonOf(overloadedChat), embeddingsBody, "bad-openai"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := flakyStack(t, c.answer, nil)
			status, body, id := st.send(t, c.req)
			if status != http.StatusOK || strings.Contains(body, "overloaded") || strings.Contains(body, "UNAVAILABLE") {
				t.Fatalf("client got %d %s, want the next deployment's answer", status, body)
			}
			served := st.sink.event(t, id)
			if served.Status != usage.StatusOK || served.NotCharged || served.Attempt != 2 || served.Deployment == c.bad {
				t.Fatalf("served %+v, want the fallback's ok second attempt", served)
			}
			evs := st.sink.eventsOf(id)
			if len(evs) != 2 {
				t.Fatalf("%d events, want 2: %+v", len(evs), evs)
			}
			for _, e := range evs {
				if e.ID == id {
					continue
				}
				if !e.NotCharged || e.RequestID != id || e.Status != usage.StatusUpstreamError || e.Deployment != c.bad ||
					e.Usage.Total() != 0 || e.HTTPStatus != 0 || e.Error == "" {
					t.Errorf("failed attempt %+v, want the operator's upstream_error, nothing billed", e)
				}
				if calls := strings.Join(st.journal.of(e.ID), " "); calls != "begin fail end" {
					t.Errorf("journal of the failed attempt: %q", calls)
				}
			}
			// The deployment cools down: the next request starts on the
			// fallback, and the failed upstream is not asked again.
			if status, body, id := st.send(t, c.req); status != http.StatusOK {
				t.Fatalf("second request: %d %s", status, body)
			} else if e := st.sink.event(t, id); e.Attempt != 1 || e.Deployment == c.bad {
				t.Errorf("second request served by %s, attempt %d, want the fallback first", e.Deployment, e.Attempt)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("the failing upstream got %d requests, want 1 (then resting)", n)
			}
		})
	}
	// Once the client has bytes, an error frame is relayed, as before.
	t.Run("after output", func(t *testing.T) {
		st, _ := flakyStack(t, sseOf(
			`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hello"}}]}`,
			"data: "+overloadedChat, "data: [DONE]"), nil)
		status, body, id := st.send(t, chatStreamOf("flaky"))
		if status != http.StatusOK || !strings.Contains(body, "hello") || !strings.Contains(body, "overloaded") {
			t.Fatalf("client got %d %s, want the output and the error frame", status, body)
		}
		if evs := st.sink.eventsOf(id); len(evs) != 1 || evs[0].Status != usage.StatusUpstreamError || evs[0].NotCharged {
			t.Fatalf("events %+v, want the one attempt, charged", evs)
		}
	})
}

// TestAClientErrorUnderA200DoesNotFailOver: an error that names the
// client's side is the client's answer, as before, and leaves the
// deployment's health as it was: a client cannot cool a deployment down.
func TestAClientErrorUnderA200DoesNotFailOver(t *testing.T) {
	const invalid = `{"error":{"message":"messages: bad role","type":"invalid_request_error","param":null,"code":"invalid_value"}}`
	const anthropicInvalid = `{"type":"error","error":{"type":"invalid_request_error","message":"bad role"}}`
	for _, c := range []struct {
		name   string
		answer errorAnswer
		req    errorUnder200Request
		status int // what the client gets, as before
	}{
		{"chat stream", sseOf("data: "+invalid, "data: [DONE]"), chatStreamOf("flaky"), 200},
		{"chat body", jsonOf(invalid), chatBodyOf("flaky"), 200},
		{"server_error with a 400 code", jsonOf(`{"error":{"message":"bad role","type":"server_error","code":400}}`), chatBodyOf("flaky"), 200},
		{"anthropic stream", sseOf("event: error\ndata: " + anthropicInvalid), anthropicStream, 200},
		{"gemini stream", sseOf("data: " + `{"error":{"code":400,"message":"bad role","status":"INVALID_ARGUMENT"}}`), geminiStream, 200},
		{"an error of no known type", jsonOf(`{"error":{"message":"bad role"}}`), chatBodyOf("flaky"), 200},
		// A translated body that is an error was answered 502, and failed
		// over whatever the error said: it still gets its 502, but a
		// client's error no longer fails over.
		{"chat body from Anthropic", jsonOf(anthropicInvalid), chatBodyOf("claude-flaky"), 502},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := flakyStack(t, c.answer, nil)
			for i := range 2 {
				status, body, id := st.send(t, c.req)
				if status != c.status || !strings.Contains(body, "bad role") {
					t.Fatalf("request %d: client got %d %s, want the upstream's error", i, status, body)
				}
				e := st.sink.event(t, id)
				if evs := st.sink.eventsOf(id); len(evs) != 1 || e.Status != usage.StatusUpstreamError || e.NotCharged || e.Attempt != 1 {
					t.Fatalf("request %d: events %+v, want the one attempt's upstream_error", i, evs)
				}
			}
			if n := hits.Load(); n != 2 {
				t.Errorf("the upstream got %d requests, want 2: a client's error does not cool it down", n)
			}
		})
	}
}

// TestAServerErrorUnderA200OnTheLastAttempt: with no attempt to follow,
// the client gets the error as before, and the deployment still cools down.
func TestAServerErrorUnderA200OnTheLastAttempt(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer errorAnswer
		req    errorUnder200Request
	}{
		{"chat stream", sseOf("data: "+overloadedChat, "data: [DONE]"), chatStreamOf("flaky")},
		{"chat body", jsonOf(overloadedChat), chatBodyOf("flaky")},
		{"anthropic stream", sseOf("event: error\ndata: " + overloadedAnthropic), anthropicStream},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hits := flakyStack(t, c.answer, func(c *gateway.Config) { c.Retry.MaxAttempts = 1 })
			status, body, id := st.send(t, c.req)
			if status != http.StatusOK || !strings.Contains(body, "verloaded") {
				t.Fatalf("client got %d %s, want the upstream's error as it came", status, body)
			}
			if e := st.sink.event(t, id); e.Status != usage.StatusUpstreamError || e.NotCharged || e.Usage.Total() != 0 {
				t.Fatalf("event %+v", e)
			}
			if status, body, id := st.send(t, c.req); status != http.StatusOK {
				t.Fatalf("second request: %d %s", status, body)
			} else if e := st.sink.event(t, id); e.Status != usage.StatusOK || e.Deployment == "bad-openai" || e.Deployment == "bad-anthropic" {
				t.Errorf("second request %+v, want the fallback while the failed deployment rests", e)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("the failing upstream got %d requests, want 1", n)
			}
		})
	}
}

// wantFailedOver checks request id, sent as req, after deployment bad
// failed it: the client was answered by the fallback's ok second attempt;
// the failed attempt's event is the operator's upstream_error, billing
// nothing, with an error errOK accepts; and bad rests: the next request
// starts on the fallback, bad's upstream asked once in all (hits).
func wantFailedOver(t *testing.T, st *stack, req errorUnder200Request, id, bad string, hits *atomic.Int64, errOK func(string) bool) {
	t.Helper()
	served := st.sink.event(t, id)
	if served.Status != usage.StatusOK || served.NotCharged || served.Attempt != 2 || served.Deployment == bad {
		t.Fatalf("served %+v, want the fallback's ok second attempt", served)
	}
	evs := st.sink.eventsOf(id)
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2: %+v", len(evs), evs)
	}
	for _, e := range evs {
		if e.ID != id && (!e.NotCharged || e.Status != usage.StatusUpstreamError || e.Deployment != bad ||
			e.Usage.Total() != 0 || !errOK(e.Error)) {
			t.Errorf("failed attempt %+v, want the operator's upstream_error, nothing billed", e)
		}
	}
	if code, body, id := st.send(t, req); code != http.StatusOK {
		t.Fatalf("second request: %d %s", code, body)
	} else if e := st.sink.event(t, id); e.Attempt != 1 || e.Deployment == bad {
		t.Errorf("second request served by %s, attempt %d, want the fallback first", e.Deployment, e.Attempt)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the failing upstream got %d requests, want 1 (then resting)", n)
	}
}

// wantRested checks that deployment bad rests after failing a request:
// the next request, sent as req, is served by the fallback, and bad's
// upstream was asked once in all (hits).
func wantRested(t *testing.T, st *stack, req errorUnder200Request, bad string, hits *atomic.Int64) {
	t.Helper()
	if code, body, id := st.send(t, req); code != http.StatusOK {
		t.Fatalf("second request: %d %s", code, body)
	} else if e := st.sink.event(t, id); e.Deployment == bad {
		t.Errorf("second request %+v, want the fallback while the failed deployment rests", e)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the failing upstream got %d requests, want 1 (then resting)", n)
	}
}

// wantRelayed404 checks that a 404 answer, a client's own (an id it sent,
// a provider/model name it chose: "bad-openai" routes every name), sent
// as req twice, reaches the client as it came (saying want), one attempt
// each, and rests nothing: the upstream is asked both times.
func wantRelayed404(t *testing.T, answer errorAnswer, req errorUnder200Request, want string) {
	t.Helper()
	st, hits := refusingStack(t, http.StatusNotFound, answer, func(c *gateway.Config) {
		for i := range c.Providers {
			if c.Providers[i].Name == "bad-openai" {
				c.Providers[i].PrefixRoutes = gateway.PrefixAll
			}
		}
	})
	for i := range 2 {
		code, body, id := st.send(t, req)
		if code != http.StatusNotFound || !strings.Contains(body, want) {
			t.Fatalf("request %d: client got %d %s, want the upstream's 404", i, code, body)
		}
		if evs := st.sink.eventsOf(id); len(evs) != 1 || evs[0].Attempt != 1 || evs[0].Status != usage.StatusUpstreamError {
			t.Fatalf("request %d: events %+v, want the one attempt", i, evs)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the upstream got %d requests, want 2: a client's 404 rests nothing", n)
	}
}
