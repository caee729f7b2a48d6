package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAttribution: the end user and tags a request names, in the body
// (OpenAI's safety_identifier, user and metadata; Anthropic's
// metadata.user_id) or in the X-Tollgate headers (which win), are on its
// event; a body's oversized values are cut and the cut recorded; a bad
// header is refused in the route's envelope.
func TestAttribution(t *testing.T) {
	t.Parallel()
	st := newStack(t, nil)
	auth := []string{"Authorization", "Bearer " + testKey}
	tests := []struct {
		name, path, body string
		header           []string
		endUser          string
		tags             map[string]string
		corrections      string
	}{
		{"openai user", "/v1/chat/completions", `{"model":"sim-small","max_tokens":2,"user":"u-1","messages":[{"role":"user","content":"hi"}]}`,
			nil, "u-1", nil, ""},
		{"safety_identifier wins over user", "/v1/chat/completions",
			`{"model":"sim-small","max_tokens":2,"user":"u-1","safety_identifier":"s-1","metadata":{"team":"search"},"messages":[{"role":"user","content":"hi"}]}`,
			nil, "s-1", map[string]string{"team": "search"}, ""},
		{"headers win", "/v1/chat/completions", `{"model":"sim-small","max_tokens":2,"user":"u-1","metadata":{"team":"search","app":"x"},"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"X-Tollgate-End-User", "h-1", "X-Tollgate-Metadata", `{"team":"ads"}`}, "h-1", map[string]string{"team": "ads", "app": "x"}, ""},
		{"anthropic metadata.user_id", "/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":2,"metadata":{"user_id":"a-1"},"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"X-Tollgate-Metadata", `{"feature":"chat"}`}, "a-1", map[string]string{"feature": "chat"}, ""},
		{"gemini by header", "/gemini/v1beta/models/gemini-sim:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			[]string{"X-Tollgate-End-User", "g-1"}, "g-1", nil, ""},
		{"an oversized user is cut", "/v1/chat/completions", `{"model":"sim-small","max_tokens":2,"user":"` + strings.Repeat("u", 300) + `","messages":[{"role":"user","content":"hi"}]}`,
			nil, strings.Repeat("u", 253) + "…", nil, "end_user_truncated"},
	}
	for _, tt := range tests {
		resp := st.post(t, tt.path, tt.body, append(auth, tt.header...)...)
		code, body := answer(t, resp)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", tt.name, code, body)
			continue
		}
		e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
		if e.EndUser != tt.endUser || len(e.Metadata) != len(tt.tags) || e.Corrections != tt.corrections {
			t.Errorf("%s: end user %q tags %v corrections %q; want %q %v %q", tt.name, e.EndUser, e.Metadata, e.Corrections,
				tt.endUser, tt.tags, tt.corrections)
		}
		for k, v := range tt.tags {
			if e.Metadata[k] != v {
				t.Errorf("%s: tag %s = %q, want %q", tt.name, k, e.Metadata[k], v)
			}
		}
	}
	for _, bad := range []struct{ path, body, header, value, envelope string }{
		{"/v1/chat/completions", `{"model":"sim-small","messages":[{"role":"user","content":"hi"}]}`, "X-Tollgate-Metadata", `["x"]`, `"invalid_request_error"`},
		{"/v1/chat/completions", `{"model":"sim-small","messages":[{"role":"user","content":"hi"}]}`, "X-Tollgate-Metadata", `{"a":1}`, `"invalid_request_error"`},
		{"/anthropic/v1/messages", `{"model":"claude-sim","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, "X-Tollgate-End-User", strings.Repeat("x", 257), `"type":"error"`},
	} {
		resp := st.post(t, bad.path, bad.body, append(auth, bad.header, bad.value)...)
		code, body := answer(t, resp)
		if code != http.StatusBadRequest || !strings.Contains(body, bad.header) || !strings.Contains(body, bad.envelope) {
			t.Errorf("%s %s: %d %s, want 400 naming the header in the route's envelope", bad.path, bad.header, code, body)
		}
	}
}
