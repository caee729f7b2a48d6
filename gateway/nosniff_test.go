package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAnswersAreNotSniffable: the LLM listener's JSON answers echo what
// the client sent (the path of a route that does not exist, a model name)
// as it was sent, "<" and ">" included, and carried no
// X-Content-Type-Options: a link to
// http://gateway/v1/<img src=x onerror=...> was a page of the gateway's
// origin to a browser that sniffs. Every answer says nosniff, as the
// customer API's and the admin API's do.
func TestAnswersAreNotSniffable(t *testing.T) {
	st := newStack(t, nil)
	get := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, st.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for name, resp := range map[string]*http.Response{
		"no such route": get("/v1/%3Cimg%20src=x%3E"),
		"unknown model": st.post(t, "/v1/chat/completions", `{"model":"<img src=x>","messages":[{"role":"user","content":"hi"}]}`),
		"a completion":  st.post(t, "/v1/chat/completions", `{"model":"sim-small","messages":[{"role":"user","content":"hi"}]}`),
		"models":        get("/v1/models"),
		"healthz":       get("/healthz"),
	} {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: %d X-Content-Type-Options %q, want nosniff; body %s", name, resp.StatusCode, got, strings.TrimSpace(string(b)))
		}
	}
}
