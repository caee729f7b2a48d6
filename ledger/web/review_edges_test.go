package web_test

// Edges of the portal's and console's server side found by a hostile review. Each test
// here failed before its fix; see the comment on each.

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger/web"
)

// stubSelf stands in for the customer API: every key in keys is a valid
// key of the customer it maps to (named so, with the id "id-" + name); any
// other key is refused with 401.
func stubSelf(keys map[string]string) http.Handler {
	customers := map[string][2]string{}
	for k, name := range keys {
		customers[k] = [2]string{"id-" + name, name}
	}
	return stubSelfCustomers(customers)
}

// stubSelfCustomers is stubSelf with each key's customer given as its id
// and name.
func stubSelfCustomers(keys map[string][2]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cu, ok := keys[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"bad key","code":"invalid_api_key"}}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"customer_id":%q,"customer_name":%q,"sections":[],"unpriced":[]}`, cu[0], cu[1])
	})
}

func portalOver(self http.Handler) http.Handler {
	r := chi.NewRouter()
	web.NewPortal(self, slog.New(slog.DiscardHandler)).Routes(r)
	return r
}

// signInTo posts the portal's sign-in form to h and returns the session
// cookie, failing unless the sign-in succeeds.
func signInTo(t *testing.T, h http.Handler, key string) *http.Cookie {
	t.Helper()
	req := httptest.NewRequest("POST", "/portal/signin", strings.NewReader(url.Values{"key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) == 0 {
		t.Fatalf("sign in = %d %s, want 303 with a cookie", rec.Code, rec.Body)
	}
	return rec.Result().Cookies()[0]
}

// signedIn reports whether cookie is a live portal session: GET
// /portal/signin redirects a signed-in browser to the portal.
func signedIn(h http.Handler, cookie *http.Cookie) bool {
	req := httptest.NewRequest("GET", "/portal/signin", nil)
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code == http.StatusSeeOther
}

// TestPortalCustomerEvictsOtherCustomersSessions: the portal's
// session store holds at most 10000 sessions for all customers together
// and drops the oldest beyond that, with no bound per customer. Any one
// customer holding a key can script 10000 sign-ins (sign-in needs no CSRF
// token, only the key) and so sign every other customer out of the
// portal, again and again. One customer's actions must not end another
// customer's session.
func TestPortalCustomerEvictsOtherCustomersSessions(t *testing.T) {
	h := portalOver(stubSelf(map[string]string{"tg-victim": "victim", "tg-attacker": "attacker"}))
	victim := signInTo(t, h, "tg-victim")
	if !signedIn(h, victim) {
		t.Fatal("the victim's session is not live right after sign-in")
	}
	for range 10000 {
		signInTo(t, h, "tg-attacker")
	}
	if !signedIn(h, victim) {
		t.Errorf("another customer's 10000 sign-ins ended the victim's portal session")
	}
}

// TestPortalSameNameCustomerEvictsSessions: the portal bounds each
// customer's sessions at 100, dropping that customer's oldest beyond it,
// but it counts them by the session's subject, which Portal.checkKey set
// to the customer's name, not its id. Customer names are not unique: a
// customer given the same name as another (or named so by its own
// signup) signs the other out of the portal with 100 sign-ins, again and
// again. Sessions must be counted per customer id.
func TestPortalSameNameCustomerEvictsSessions(t *testing.T) {
	h := portalOver(stubSelfCustomers(map[string][2]string{
		"tg-victim": {"11111111-1111-1111-1111-111111111111", "Acme"},
		"tg-other":  {"22222222-2222-2222-2222-222222222222", "Acme"},
	}))
	victim := signInTo(t, h, "tg-victim")
	for range 100 {
		signInTo(t, h, "tg-other")
	}
	if !signedIn(h, victim) {
		t.Errorf("100 sign-ins by another customer of the same name ended the victim's portal session")
	}
}

// TestPortalSessionsPerCustomerBound: a customer holds at most 100
// portal sessions: its 100 are all live, and a 101st sign-in ends its
// oldest (and no other). A mutation audit: a bound of 101 passed every
// test.
func TestPortalSessionsPerCustomerBound(t *testing.T) {
	h := portalOver(stubSelf(map[string]string{"tg-busy": "busy"}))
	var cookies []*http.Cookie
	for range 100 {
		cookies = append(cookies, signInTo(t, h, "tg-busy"))
	}
	if !signedIn(h, cookies[0]) || !signedIn(h, cookies[99]) {
		t.Fatal("a customer's first or 100th session is not live")
	}
	signInTo(t, h, "tg-busy")
	if signedIn(h, cookies[0]) || !signedIn(h, cookies[1]) {
		t.Errorf("after a 101st sign-in: the oldest session live = %v, the second = %v; want the oldest ended, the second live",
			signedIn(h, cookies[0]), signedIn(h, cookies[1]))
	}
}

// countingReader is an endless body of 'a's that counts what is read.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	c.n += int64(len(p))
	return len(p), nil
}

// TestPortalSigninBodyUnbounded: POST /portal/signin is open to
// anyone on the LLM listener and parses its form with
// r.PostFormValue, with no http.MaxBytesReader: a multipart body is read to
// its end (32 MiB kept in memory, the rest spooled to temporary files), so
// an anonymous client makes the server buffer tens of MiB per request. (The
// chat routes cap bodies at MaxRequestBytes; the admin listener at 8 MiB.)
// A sign-in form is a few hundred bytes: the portal should stop reading
// well before 1 MiB and answer 413.
func TestPortalSigninBodyUnbounded(t *testing.T) {
	h := portalOver(stubSelf(map[string]string{}))
	const size = 64 << 20
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	_ = mw.WriteField("key", "tg-nope")
	if _, err := mw.CreateFormFile("padding", "padding.bin"); err != nil {
		t.Fatal(err)
	}
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	filler := &countingReader{}
	body := io.MultiReader(bytes.NewReader(head.Bytes()), io.LimitReader(filler, size), strings.NewReader(tail))
	req := httptest.NewRequest("POST", "/portal/signin", body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if read := filler.n; read > 1<<20 {
		t.Errorf("an anonymous POST /portal/signin made the server read %d MiB of body (answered %d); want it cut off below 1 MiB with 413",
			read>>20, rec.Code)
	}
}

// TestOversizedSignedInFormIs413: docs/console.md ("Forms are read up to
// 64 KiB; a larger body is refused with 413") promises 413 for every form.
// The sign-in form honoured it, but a signed-in POST (signout here; the
// console's credit, key and price forms go the same way, through require)
// whose body is over 64 KiB was answered 403 "the form's CSRF token is
// missing or wrong", even with the right CSRF token first: require's
// validCSRF read the form, the read failed on http.MaxBytesError, and the
// failure was taken for a bad token.
func TestOversizedSignedInFormIs413(t *testing.T) {
	h := portalOver(stubSelf(map[string]string{"tg-a": "a"}))
	cookie := signInTo(t, h, "tg-a")

	req := httptest.NewRequest("GET", "/portal/", nil)
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("GET /portal/ = %d, no CSRF token in the page", rec.Code)
	}

	body := "csrf=" + m[1] + "&pad=" + strings.Repeat("a", 70<<10)
	req = httptest.NewRequest("POST", "/portal/signout", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST /portal/signout with a valid CSRF token and a 70 KiB body = %d %q, want 413",
			rec.Code, strings.TrimSpace(rec.Body.String()))
	}
}

// TestPortalBadInputAnswers5xx: input a customer controls that
// the customer API refuses as invalid (400) is answered 502 Bad Gateway by
// the portal (Portal.refuse answers every non-401 API error 502): a forged
// or mangled ?cursor= on /portal/requests, and a period that passes the
// portal's YYYY-MM pattern but is outside the API's years (0000-01). Bad
// input must get a 4xx.
func TestPortalBadInputAnswers5xx(t *testing.T) {
	g := newRig(t)
	_, key, _ := g.customer("alpha", "m", 1)
	c := g.browser()
	g.signIn(c, "portal", "key", key)
	for _, p := range []string{"/portal/requests?cursor=garbage", "/portal/statements/0000-01.csv"} {
		if status, _, _ := g.do(c, "GET", p, nil); status >= 500 {
			t.Errorf("GET %s = %d, want a 4xx for bad input", p, status)
		}
	}
}

// TestConsoleStatementCSVBadCustomer5xx: the console's statement
// download answers 502 for a customer id that is not a UUID (the API says
// 400) and for one that does not exist (the API says 404): Console.statementCSV
// maps every API error to 502. The customer page answers 404 for both.
func TestConsoleStatementCSVBadCustomer5xx(t *testing.T) {
	g := newRig(t)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000000"} {
		p := "/console/customers/" + id + "/statements/2026-01.csv"
		if status, body, _ := g.do(c, "GET", p, nil); status >= 500 {
			t.Errorf("GET %s = %d %q, want 404 (or 400)", p, status, body)
		}
	}
}

// TestSessionCookieSecureBehindTLSProxy: docs/console.md says the
// listeners speak plain HTTP and are put behind a TLS-terminating proxy
// when they leave the host, yet the session cookie was Secure only when
// r.TLS was set, which it never is there: the portal's cookie, on the
// internet-facing LLM listener, went out without Secure, so a browser
// sends it over any plain-HTTP request to the host (a redirecting port
// 80, a link an attacker on the network injects). A request the proxy
// marks X-Forwarded-Proto: https came over TLS and gets a Secure cookie;
// a spoofed header can only make the cookie stricter.
func TestSessionCookieSecureBehindTLSProxy(t *testing.T) {
	h := portalOver(stubSelf(map[string]string{"tg-a": "a"}))
	for _, proto := range []string{"https", "HTTPS", "https, http"} {
		req := httptest.NewRequest("POST", "/portal/signin", strings.NewReader(url.Values{"key": {"tg-a"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-Proto", proto)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		cs := rec.Result().Cookies()
		if rec.Code != http.StatusSeeOther || len(cs) == 0 || !cs[0].Secure {
			t.Errorf("sign in behind a TLS proxy (X-Forwarded-Proto: %s) = %d, cookie %v, want a Secure cookie", proto, rec.Code, rec.Header().Get("Set-Cookie"))
		}
	}
	if c := signInTo(t, h, "tg-a"); c.Secure {
		t.Errorf("sign in over plain HTTP set a Secure cookie, which the browser would drop")
	}
}
