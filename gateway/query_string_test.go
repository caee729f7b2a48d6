package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMalformedQueryStringRefused: a query string that does not parse
// whole (a bad %-escape, a ';', more than 10,000 parameters) is refused
// with 400 in the route's own error envelope, before the key is looked
// for in ?key= and before anything goes upstream, as the admin and
// customer APIs refuse it. url.Values dropped the bad pair without a word:
// ?key=tg-test-key%zz read as no key (401), and a good key in a header
// with ?alt=sse%zz went upstream as if no alt were sent.
func TestMalformedQueryStringRefused(t *testing.T) {
	st := newStack(t, nil)
	chat := `{"model":"sim-pro","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	anthropicBody := `{"model":"claude-sim","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	gemini := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	tooMany := "key=" + testKey + strings.Repeat("&p=1", 10000)
	for _, c := range []struct {
		name, method, path, body string
		header                   []string
		want                     string // in the body: the route's envelope
	}{
		{"chat, bad escape in ?key=", "POST", "/v1/chat/completions?key=" + testKey + "%zz", chat, []string{"X-Unused", "1"},
			`{"error":{"message":"malformed query string: invalid URL escape \"%zz\"","type":"invalid_request_error","param":null,"code":"invalid_request"}}`},
		{"chat, a good key in the header", "POST", "/v1/chat/completions?x=%zz", chat, nil, `"code":"invalid_request"`},
		{"chat, a semicolon", "POST", "/v1/chat/completions?a=1;b=2", chat, nil, `malformed query string: invalid semicolon separator in query`},
		{"chat, too many parameters", "POST", "/v1/chat/completions?" + tooMany, chat, []string{"X-Unused", "1"}, `too many query parameters: 10001, at most 10000`},
		{"models", "GET", "/v1/models?key=" + testKey + "%zz", "", []string{"X-Unused", "1"}, `"code":"invalid_request"`},
		{"anthropic", "POST", "/anthropic/v1/messages?beta=%", anthropicBody, []string{"x-api-key", testKey},
			`{"type":"error","error":{"type":"invalid_request_error","message":"malformed query string:`},
		{"gemini, bad escape in ?key=", "POST", "/gemini/v1beta/models/gemini-sim:generateContent?key=" + testKey + "%zz", gemini, []string{"X-Unused", "1"},
			`{"error":{"code":400,"message":"malformed query string: invalid URL escape \"%zz\"","status":"INVALID_ARGUMENT"}}`},
		{"gemini, bad escape in ?alt=", "POST", "/gemini/v1beta/models/gemini-sim:streamGenerateContent?alt=sse%zz&key=" + testKey, gemini, []string{"X-Unused", "1"},
			`"message":"malformed query string: invalid URL escape \"%zz\"","status":"INVALID_ARGUMENT"`},
	} {
		req, _ := http.NewRequest(c.method, st.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		if c.header == nil {
			req.Header.Set("Authorization", "Bearer "+testKey)
		}
		for i := 0; i+1 < len(c.header); i += 2 {
			req.Header.Set(c.header[i], c.header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := answer(t, resp); code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want 400 with %s", c.name, code, body, c.want)
		}
	}
	if s := st.simStats(t); s.Requests.Total != 0 {
		t.Errorf("%d requests went upstream; want none", s.Requests.Total)
	}
	if n := st.sink.count(); n != 0 {
		t.Errorf("%d usage events; want none (nothing went upstream)", n)
	}
	// A query that parses is served as before, its key read from ?key=.
	resp := st.post(t, "/gemini/v1beta/models/gemini-sim:generateContent?key="+testKey, gemini, "X-Unused", "1")
	if code, body := answer(t, resp); code != http.StatusOK {
		t.Errorf("a well-formed ?key=: %d %s", code, body)
	}
}
