package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

type errorEnvelope struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, resp *http.Response) errorEnvelope {
	t.Helper()
	var e errorEnvelope
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("body %s is not an OpenAI error envelope: %v", b, err)
	}
	return e
}

// TestGatewayRejectsBadRequestsWithOpenAIErrors checks each client error's
// status and envelope; none of them reaches the upstream.
func TestGatewayRejectsBadRequestsWithOpenAIErrors(t *testing.T) {
	s := newStack(t, nil)
	send := func(key, body string) *http.Response {
		req, _ := http.NewRequest("POST", s.gateway+"/v1/chat/completions", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	ok := `{"model":"sim-small","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, key, body string
		status          int
		code, mention   string
	}{
		{"no key", "", ok, 401, "invalid_api_key", "missing API key"},
		{"unknown key", "tg-unknown", ok, 401, "invalid_api_key", "incorrect"},
		{"invalid JSON", s.secret, `{"model":`, 400, "invalid_request", "JSON object"},
		{"wrong type", s.secret, `{"model":"sim-small","stream":"yes","messages":[]}`, 400, "invalid_request", "stream"},
		{"no messages", s.secret, `{"model":"sim-small"}`, 400, "invalid_request", "messages"},
		{"unknown model", s.secret, `{"model":"gpt-nope","messages":[]}`, 404, "model_not_found", "gpt-nope"},
		{"unknown provider prefix", s.secret, `{"model":"nobody/m","messages":[]}`, 404, "model_not_found", "nobody/m"},
		{"too large", s.secret, `{"model":"sim-small","messages":[{"role":"user","content":"` + strings.Repeat("x", 9<<20) + `"}]}`, 413, "request_too_large", "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(tc.key, tc.body)
			e := decodeError(t, resp)
			if resp.StatusCode != tc.status || e.Error.Code == nil || *e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.mention) {
				t.Fatalf("%d %+v, want %d %s mentioning %q", resp.StatusCode, e.Error, tc.status, tc.code, tc.mention)
			}
		})
	}
	if st := s.sim.Stats(); st.Requests.Total != 0 {
		t.Fatalf("the upstream saw %d requests, want 0", st.Requests.Total)
	}
	// The gateway keeps serving everyone else.
	if resp := send(s.secret, ok); resp.StatusCode != 200 {
		t.Fatalf("a good request after bad ones: %d", resp.StatusCode)
	}
}

// TestUpstreamErrorStatusIsPassedOnAndRecorded checks that an upstream's
// refusal reaches the client with its status and is recorded as a failed
// event with no billable tokens.
func TestUpstreamErrorStatusIsPassedOnAndRecorded(t *testing.T) {
	s := newStack(t, nil)
	for _, status := range []int{429, 500, 503} {
		resp := s.post("/v1/chat/completions", `{"model":"sim-small","stream":true,"metadata":{"sim_status":"`+
			strconv.Itoa(status)+`"},"messages":[{"role":"user","content":"hi"}]}`)
		e := decodeError(t, resp)
		if resp.StatusCode != status || e.Error.Message == "" {
			t.Fatalf("status %d %+v, want %d", resp.StatusCode, e, status)
		}
		ev := s.event(resp.Header.Get("X-Request-Id"))
		if ev.Status != usage.StatusUpstreamError || ev.HTTPStatus != status || ev.Usage != (usage.Tokens{}) || ev.Cost != "0" {
			t.Fatalf("event = %+v", ev)
		}
	}
}
