package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestUnknownMethodsAnswerAnErrorBody: a method chi does not know (FOO,
// PROPFIND) is answered on both listeners as any other method a path does
// not take, 405 with a JSON error body. A review found a bare 405 with
// no body on every path of both listeners (the routers that mount the
// APIs answered it before them), which the admin API's client read as an
// internal error.
func TestUnknownMethodsAnswerAnErrorBody(t *testing.T) {
	s := newStack(t, nil)
	for _, c := range []struct{ base, path, auth string }{
		{s.admin, "/admin/v1/usage", "Bearer " + testAdminToken},
		{s.admin, "/admin/v1/customers", "Bearer " + testAdminToken},
		{s.gateway, "/v1/chat/completions", "Bearer " + s.secret},
		{s.gateway, "/v1/usage", "Bearer " + s.secret},
	} {
		for _, method := range []string{"FOO", "PROPFIND"} {
			req, _ := http.NewRequest(method, c.base+c.path, nil)
			req.Header.Set("Authorization", c.auth)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e errorEnvelope
			if resp.StatusCode != http.StatusMethodNotAllowed || json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
				t.Errorf("%s %s = %d %q; want 405 with a JSON error", method, c.path, resp.StatusCode, body)
			}
		}
	}
}
