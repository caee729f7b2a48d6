package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// routeCase is one route a request can be sent on, with the provider type
// its deployments must be, and its body for model.
type routeCase struct {
	name, typ, version string
	path               func(model string) string
	body               func(model string, stream bool) string
	header             string
}

// routeCases are the chat route and the native Anthropic and Gemini ones.
var routeCases = []routeCase{
	{name: "chat", typ: "openai", version: "/v1",
		path: func(string) string { return "/v1/chat/completions" },
		body: func(m string, stream bool) string {
			return `{"model":"` + m + `","stream":` + boolText(stream) + `,"messages":[{"role":"user","content":"hi there"}]}`
		},
		header: "Authorization"},
	{name: "anthropic", typ: "anthropic", version: "/v1",
		path: func(string) string { return "/anthropic/v1/messages" },
		body: func(m string, stream bool) string {
			return `{"model":"` + m + `","max_tokens":9,"stream":` + boolText(stream) + `,"messages":[{"role":"user","content":"hi there"}]}`
		},
		header: "x-api-key"},
	{name: "gemini", typ: "gemini", version: "/v1beta",
		path:   func(m string) string { return "/gemini/v1beta/models/" + m + ":generateContent" },
		body:   func(string, bool) string { return `{"contents":[{"role":"user","parts":[{"text":"hi there"}]}]}` },
		header: "x-goog-api-key"},
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// send posts rc's request for model with the key secret, and returns the
// response's status, body and request id.
func (rc routeCase) send(t *testing.T, st *stack, model, secret string, stream bool) (int, string, string) {
	t.Helper()
	path := rc.path(model)
	if stream && rc.typ == "gemini" {
		path = "/gemini/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
	}
	v := secret
	if rc.header == "Authorization" {
		v = "Bearer " + secret
	}
	resp := st.post(t, path, rc.body(model, stream), rc.header, v)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), resp.Header.Get("X-Request-Id")
}

// TestRequestTimeoutCountsFromArrival: request_timeout bounds "a whole
// request, from its arrival to its end" (docs/configuration.md), but each
// attempt was timed from its own start: with failover, a request whose
// first deployment failed slowly ran up to retry.budget past it, the next
// attempt getting the whole request_timeout again. Now a later attempt
// gets what is left: here 1.5 s in all, the first deployment answering
// 503 after 0.6 s and the second never answering, so the client has its
// 504 naming request_timeout at 1.5 s, not 2.1 s. On the chat route and
// the native ones.
func TestRequestTimeoutCountsFromArrival(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(600 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
	}))
	t.Cleanup(slow.Close)
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // never answers
	}))
	t.Cleanup(hung.Close)
	const requestTimeout = 1500 * time.Millisecond
	for _, rc := range routeCases {
		t.Run(rc.name, func(t *testing.T) {
			st := newStack(t, func(c *gateway.Config) {
				for _, p := range []struct{ name, url string }{{"slow", slow.URL}, {"hung", hung.URL}} {
					c.Providers = append(c.Providers, gateway.ProviderConfig{Name: p.name, Type: rc.typ, BaseURL: p.url + rc.version,
						APIKey: "sk-" + p.name + "-123456789", ConnectTimeout: 20 * time.Second, StallTimeout: time.Minute,
						RequestTimeout: requestTimeout})
				}
				c.Models = append(c.Models, gateway.ModelConfig{Name: "two", Deployments: []gateway.DeploymentConfig{
					{Name: "slow", Provider: "slow", UpstreamModel: "sim-small", Weight: 1 << 30},
					{Name: "hung", Provider: "hung", UpstreamModel: "sim-small", Weight: 1}}})
			})
			began := time.Now()
			code, body, id := rc.send(t, st, "two", testKey, false)
			took := time.Since(began)
			if code != http.StatusGatewayTimeout || !strings.Contains(body, "request_timeout") {
				t.Fatalf("status %d %.300s; want 504 naming request_timeout", code, body)
			}
			if took > requestTimeout+400*time.Millisecond {
				t.Errorf("the client waited %s for its 504; request_timeout is %s from the request's arrival", took, requestTimeout)
			}
			evs := st.sink.eventsOf(id)
			if len(evs) != 2 || evs[0].Deployment != "slow" || !evs[0].NotCharged || evs[0].Status != usage.StatusUpstreamError {
				t.Fatalf("attempts %+v, want slow's 503 (not charged), then hung", evs)
			}
			if e := evs[1]; e.ID != id || e.Deployment != "hung" || e.Status != usage.StatusTimeout || !strings.Contains(e.Error, "request_timeout") ||
				e.NotCharged || e.HTTPStatus != http.StatusGatewayTimeout {
				t.Errorf("the request's event %+v; want hung's, a timeout at request_timeout, 504", e)
			}
			if rc.name != "chat" {
				return
			}
			// slow rests; hung, cut off at what slow left of request_timeout,
			// does not (its time was spent elsewhere): the next request is
			// hung's first.
			code, body, id = rc.send(t, st, "two", testKey, false)
			if evs := st.sink.eventsOf(id); code != http.StatusGatewayTimeout || len(evs) != 1 || evs[0].Deployment != "hung" {
				t.Errorf("next request: status %d %.300s, attempts %+v; want hung's alone", code, body, evs)
			}
		})
	}
}

// TestNoTimeLeftNoAttempt: when an attempt fails with nothing left of
// request_timeout (here the first deployment never answers, and is cut
// off at it), the next one is not sent: the client gets the documented
// 504 naming request_timeout, the request's event a timeout, and the
// deployment that was never asked is not rested for it. It was sent with a
// whole request_timeout of its own, and served the request after
// request_timeout had passed.
func TestNoTimeLeftNoAttempt(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // never answers
	}))
	t.Cleanup(hung.Close)
	const requestTimeout = 500 * time.Millisecond
	st := failoverStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "hung", Type: "openai", BaseURL: hung.URL + "/v1",
			APIKey: "sk-hung-123456789", ConnectTimeout: 20 * time.Second, StallTimeout: time.Minute, RequestTimeout: requestTimeout})
		for i := range c.Providers {
			if c.Providers[i].Name == "west" {
				c.Providers[i].RequestTimeout = requestTimeout
			}
		}
		c.Models = append(c.Models, gateway.ModelConfig{Name: "two", Deployments: []gateway.DeploymentConfig{
			{Name: "hung", Provider: "hung", UpstreamModel: "sim-small", Weight: 1 << 30},
			{Name: "west", Provider: "west", UpstreamModel: "sim-small", Weight: 1}}})
	})
	rc := routeCases[0]
	code, body, id := rc.send(t, st, "two", testKey, false)
	if code != http.StatusGatewayTimeout || !strings.Contains(body, "request_timeout") {
		t.Fatalf("status %d %.300s; want 504 naming request_timeout", code, body)
	}
	if evs := st.sink.eventsOf(id); len(evs) != 1 || evs[0].Deployment != "hung" || evs[0].Status != usage.StatusTimeout ||
		!strings.Contains(evs[0].Error, "request_timeout") || evs[0].NotCharged {
		t.Errorf("the request's events %+v; want one, hung's, a timeout at request_timeout", evs)
	}
	if n := st.simStats(t).ByDeployment["west"].Requests.OK; n != 0 {
		t.Errorf("west was sent %d requests after request_timeout had passed", n)
	}
	// hung, which had the whole request_timeout, rests; west, never asked,
	// does not: the next request is its, first try.
	code, body, id = rc.send(t, st, "two", testKey, false)
	if evs := st.sink.eventsOf(id); code != http.StatusOK || len(evs) != 1 || evs[0].Deployment != "west" {
		t.Fatalf("next request: status %d %.300s, attempts %+v; want west, first try", code, body, evs)
	}
}

// TestNoTimeLeftForTheNextDeployment: each deployment's request_timeout
// counts from the request's arrival. The first (request_timeout 5 s)
// answers 503 after 0.7 s; the second's request_timeout (0.5 s) has passed
// by then: it is not sent, the client gets 504 naming request_timeout,
// and the second deployment, never asked, does not rest.
func TestNoTimeLeftForTheNextDeployment(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(700 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
	}))
	t.Cleanup(slow.Close)
	st := failoverStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "slow", Type: "openai", BaseURL: slow.URL + "/v1",
			APIKey: "sk-slow-123456789", RequestTimeout: 5 * time.Second})
		for i := range c.Providers {
			if c.Providers[i].Name == "west" {
				c.Providers[i].RequestTimeout = 500 * time.Millisecond
			}
		}
		c.Models = append(c.Models, gateway.ModelConfig{Name: "two", Deployments: []gateway.DeploymentConfig{
			{Name: "slow", Provider: "slow", UpstreamModel: "sim-small", Weight: 1 << 30},
			{Name: "west", Provider: "west", UpstreamModel: "sim-small", Weight: 1}}})
	})
	rc := routeCases[0]
	code, body, id := rc.send(t, st, "two", testKey, false)
	if code != http.StatusGatewayTimeout || !strings.Contains(body, "request_timeout") {
		t.Fatalf("status %d %.300s; want 504 naming request_timeout", code, body)
	}
	evs := st.sink.eventsOf(id)
	if len(evs) != 2 || !evs[0].NotCharged || evs[1].Deployment != "west" || evs[1].Status != usage.StatusTimeout ||
		!strings.Contains(evs[1].Error, "request_timeout") || evs[1].Usage.Total() != 0 {
		t.Errorf("attempts %+v; want slow's 503 (not charged), then a timeout at request_timeout billing nothing", evs)
	}
	if n := st.simStats(t).ByDeployment["west"].Requests.OK; n != 0 {
		t.Errorf("west was sent %d requests after its request_timeout had passed", n)
	}
	code, body, id = rc.send(t, st, "two", testKey, false)
	if evs := st.sink.eventsOf(id); code != http.StatusOK || len(evs) != 1 || evs[0].Deployment != "west" {
		t.Fatalf("next request: status %d %.300s, attempts %+v; want west, first try", code, body, evs)
	}
}
