package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"testing"
	"time"
)

// TestDemoExitsAsTheAdminCommandsDo: tollgate demo is an admin API client,
// but a wrong admin token (or a refused request) ended it with exit 1,
// where every admin command exits 6 (unauthorized).
func TestDemoExitsAsTheAdminCommandsDo(t *testing.T) {
	srv := refusingAdmin(t, "wrong admin token")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := demo(ctx, nil, io.Discard, func(k string) string {
		return map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": "wrong"}[k]
	})
	var stderr bytes.Buffer
	if code := serverExit("demo", err, &stderr); code != exitUnauthorized || !strings.Contains(stderr.String(), "wrong admin token") {
		t.Fatalf("demo with a wrong token: exit %d, %q; want %d naming the refusal", code, stderr.String(), exitUnauthorized)
	}
}

// refusingAdmin stands in for an admin API that is healthy and refuses
// every request as unauthorized, with msg; it is closed with the test.
func refusingAdmin(t *testing.T, msg string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"code":"unauthorized","type":"unauthorized","message":"` + msg + `"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDemoErrorsSayWhatToDo: tollgate demo without TOLLGATE_ADMIN_TOKEN
// said only "missing or wrong admin token", and with the admin listener
// moved (TOLLGATE_ADMIN_LISTEN, as the README offers) "cannot reach the
// admin API at http://127.0.0.1:8081": the admin commands add, for the
// same errors, that the variable is not set, and where to point them.
// demo says so too.
func TestDemoErrorsSayWhatToDo(t *testing.T) {
	refusing := refusingAdmin(t, "missing or wrong admin token")
	// Healthy, then gone: the customers request finds nothing listening.
	gone := httptest.NewUnstartedServer(nil)
	gone.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		gone.Listener.Close()
	})
	gone.Start()
	defer gone.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		url, token string
		code       int
		want       string
	}{
		{refusing.URL, "", exitUnauthorized, "TOLLGATE_ADMIN_TOKEN is not set"},
		{gone.URL, "t", exitUnreachable, "point --admin-url or TOLLGATE_ADMIN_URL at its TOLLGATE_ADMIN_LISTEN"},
	} {
		err := demo(ctx, nil, io.Discard, func(k string) string {
			return map[string]string{"TOLLGATE_ADMIN_URL": tc.url, "TOLLGATE_ADMIN_TOKEN": tc.token}[k]
		})
		var stderr bytes.Buffer
		if code := serverExit("demo", err, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("demo against %s, token %q: exit %d, %q; want %d saying %q", tc.url, tc.token, code, stderr.String(), tc.code, tc.want)
		}
	}
	// A wrong token that is set is not said to be unset.
	err := demo(ctx, nil, io.Discard, func(k string) string {
		return map[string]string{"TOLLGATE_ADMIN_URL": refusing.URL, "TOLLGATE_ADMIN_TOKEN": "wrong"}[k]
	})
	var stderr bytes.Buffer
	if code := serverExit("demo", err, &stderr); code != exitUnauthorized || strings.Contains(stderr.String(), "not set") {
		t.Errorf("demo with a wrong token: exit %d, %q", code, stderr.String())
	}
}

// TestDemoHonoursAdminURLEnv: `tollgate demo` sends its requests to
// TOLLGATE_ADMIN_URL, as the admin commands do, and --admin-url wins over
// it; it used to go to 127.0.0.1:8081 whatever the environment said. A
// TOLLGATE_ADMIN_URL that is not an http(s) URL is a usage error, as for
// the admin commands. The server stands in for the admin API.
func TestDemoHonoursAdminURLEnv(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		switch {
		case r.URL.Path == "/healthz":
		case r.Method == "GET" && r.URL.Path == "/admin/v1/customers":
			w.Write([]byte(`{"data":[{"id":"c-demo","name":"demo"}]}`))
		case r.Method == "POST" && r.URL.Path == "/admin/v1/customers/c-demo/keys":
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"k1","customer_id":"c-demo","key":"tg-demo-secret"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := demo(ctx, nil, &out, env(map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": "t"})); err != nil {
		t.Fatalf("demo with TOLLGATE_ADMIN_URL=%s: %v (requests %v)", srv.URL, err, paths)
	}
	if !strings.Contains(out.String(), "tg-demo-secret") || !strings.Contains(out.String(), srv.URL+"/admin/v1/usage?customer_id=c-demo") {
		t.Fatalf("demo printed:\n%s", out.String())
	}
	paths = nil
	out.Reset()
	if err := demo(ctx, []string{"--admin-url", srv.URL}, &out, env(map[string]string{"TOLLGATE_ADMIN_URL": "http://127.0.0.1:1"})); err != nil ||
		len(paths) == 0 {
		t.Fatalf("demo --admin-url %s beside another TOLLGATE_ADMIN_URL: %v (requests %v)", srv.URL, err, paths)
	}
	// The LLM API printed is where TOLLGATE_LISTEN puts `tollgate serve`
	// (it printed :8080 whatever the environment said), or --gateway-url.
	for listen, want := range map[string]string{"": "http://127.0.0.1:8080", ":9090": "http://127.0.0.1:9090",
		"0.0.0.0:9091": "http://127.0.0.1:9091", "[::]:9092": "http://[::1]:9092", "gw.internal:80": "http://gw.internal:80"} {
		out.Reset()
		if err := demo(ctx, nil, &out, env(map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_LISTEN": listen})); err != nil ||
			!strings.Contains(out.String(), "curl -N "+want+"/v1/chat/completions") {
			t.Fatalf("demo with TOLLGATE_LISTEN=%q: %v, printed:\n%s\nwant the LLM API at %s", listen, err, out.String(), want)
		}
	}
	out.Reset()
	if err := demo(ctx, []string{"--gateway-url", "https://llm.example"}, &out,
		env(map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_LISTEN": ":9090"})); err != nil ||
		!strings.Contains(out.String(), "curl -N https://llm.example/v1/chat/completions") {
		t.Fatalf("demo --gateway-url beside TOLLGATE_LISTEN: %v, printed:\n%s", err, out.String())
	}
	err := demo(ctx, nil, io.Discard, env(map[string]string{"TOLLGATE_ADMIN_URL": "127.0.0.1:8081"}))
	var stderr bytes.Buffer
	if code := serverExit("demo", err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "not an http(s) URL") {
		t.Fatalf("demo with TOLLGATE_ADMIN_URL=127.0.0.1:8081: exit %d, stderr %q", code, stderr.String())
	}
}

// TestDemoListenURLIsAURL: listenURL joined TOLLGATE_LISTEN's host and
// port into a URL as they were, but a listen address is net.Listen's
// syntax, not a URL's: a service name port (config check accepts
// "127.0.0.1:http" as good, and serve listens on port 80) gave
// "http://127.0.0.1:http", which curl and net/url refuse; an IPv6 zone's
// "%" must be "%25" in a URL.
func TestDemoListenURLIsAURL(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:http":    "http://127.0.0.1:80",
		":https":            "http://127.0.0.1:443",
		"[fe80::1%lo]:9090": "http://[fe80::1%25lo]:9090",
	} {
		got := listenURL(listen)
		_, err := neturl.Parse(got)
		if got != want || err != nil {
			t.Errorf("listenURL(%q) = %q (url.Parse: %v), want %q", listen, got, err, want)
		}
	}
}
