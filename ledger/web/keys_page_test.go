package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	keyRow   = regexp.MustCompile(`<tr id="key-[0-9a-f-]{36}"><td class="name"[^>]*>([^<]+)</td>`)
	moreKeys = regexp.MustCompile(`<p class="muted" id="more-keys">[^<]*<a href="([^"]+)" rel="next">`)
)

// TestConsoleKeysArePaged: with more keys than a page, the keys page of a
// customer shows one page of 25, oldest first, with a Next page link that
// leads to the following 25 (and a First page link back), and asks the
// admin API for that page alone; the customer page shows the first 25
// keys and links to the keys page's next page; a key form sent from a
// later page returns to it. Both pages read and rendered every key: with
// 100,000 keys the keys page was 239 MB and took 16.5 s.
func TestConsoleKeysArePaged(t *testing.T) {
	var mu sync.Mutex
	var asked []string // the queries of GET /admin/v1/customers/{id}/keys
	g := newRigWrapped(t, nil, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/keys") {
				mu.Lock()
				asked = append(asked, r.URL.RawQuery)
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	})
	cu, _, _ := g.customer("many keys", "none", 0) // its key "main", made now: the last
	const extra = 60
	g.setSQL(`INSERT INTO api_keys (customer_id, name, prefix, secret_hash, created_at)
		SELECT $1, 'key-' || lpad(i::text, 4, '0'), 'tg-' || substr(md5(i::text), 1, 8), sha256(i::text::bytea),
		  timestamptz '2026-01-01 00:00:00Z' + i * interval '1 second'
		FROM generate_series(1, $2) i`, cu.ID, extra)
	seq := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, "key-"+strings.Repeat("0", 4-len(itoa(i)))+itoa(i))
		}
		return out
	}
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	get := func(path string) (body string, names []string, next string) {
		t.Helper()
		mu.Lock()
		asked = nil
		mu.Unlock()
		status, body, _ := g.do(c, "GET", path, nil)
		want := http.StatusOK
		if strings.Contains(path, "cursor=bogus") {
			want = http.StatusBadRequest // a cursor the API did not make (TestConsoleBadQueryAnswers4xx)
		}
		if status != want {
			t.Fatalf("GET %s = %d %s; want %d", path, status, body, want)
		}
		mu.Lock()
		for _, q := range asked {
			if v, _ := url.ParseQuery(q); v.Get("limit") != "25" {
				t.Errorf("GET %s asked the admin API for keys with %q; want one page, limit=25", path, q)
			}
		}
		mu.Unlock()
		for _, m := range keyRow.FindAllStringSubmatch(body, -1) {
			names = append(names, m[1])
		}
		if m := nextLink.FindStringSubmatch(body); m != nil {
			next = html.UnescapeString(m[1])
		}
		return body, names, next
	}

	keysOf := "/console/keys?customer=" + cu.ID
	body, names, next := get(keysOf)
	if !slices.Equal(names, seq(1, 25)) || !strings.HasPrefix(next, "/console/keys?") {
		t.Fatalf("the first page of keys: %v, next %q; want key-0001 to 25 and a next page", names, next)
	}
	if strings.Contains(body, "First page") || strings.Contains(body, "key-0026") {
		t.Errorf("the first page of keys links to the first page, or renders keys after it")
	}
	if u, err := url.Parse(next); err != nil || u.Path != "/console/keys" || u.Query().Get("customer") != cu.ID || u.Query().Get("cursor") == "" {
		t.Fatalf("the next page link %q: want the keys page of the customer with a cursor", next)
	}
	second := next
	body, names, next = get(second)
	first := html.EscapeString(keysOf)
	if !slices.Equal(names, seq(26, 50)) || next == "" || !strings.Contains(body, `<a href="`+first+`">First page</a>`) {
		t.Errorf("the second page of keys: %v, next %q; want key-0026 to 50, a next page and the first", names, next)
	}
	// Its forms send its cursor back: a revoke returns to this page.
	id := regexp.MustCompile(`action="/console/keys/([0-9a-f-]{36})/revoke"`).FindStringSubmatch(body)
	cursor := regexp.MustCompile(`name="cursor" value="([^"]*)"`).FindStringSubmatch(body)
	if id == nil || cursor == nil || cursor[1] == "" {
		t.Fatalf("the second page has no revoke form with its cursor")
	}
	form := url.Values{"csrf": {csrf}, "customer": {cu.ID}, "cursor": {html.UnescapeString(cursor[1])}}
	status, asks, _ := g.do(c, "POST", "/console/keys/"+id[1]+"/revoke", form)
	if status != http.StatusOK || !strings.Contains(asks, `<a href="`+html.EscapeString(second)+`">Cancel</a>`) ||
		!strings.Contains(asks, `name="cursor" value="`+cursor[1]+`"`) {
		t.Errorf("revoke on the second page, unconfirmed = %d; want the page that asks, its Cancel back to %q and its cursor:\n%s", status, second, asks)
	}
	form.Set("confirm", "yes")
	status, _, h := g.do(c, "POST", "/console/keys/"+id[1]+"/revoke", form)
	if status != http.StatusSeeOther || h.Get("Location") != second {
		t.Errorf("revoke on the second page = %d to %q; want 303 back to %q", status, h.Get("Location"), second)
	}
	// Each key's limit controls name it, as its revoke button does (a
	// browser review: 25 "Set limits" alike to a screen reader).
	if !strings.Contains(body, `<summary aria-label="Set limits of key key-0026 (`) || !strings.Contains(body, `aria-label="Save limits of key key-0026 (`) {
		t.Errorf("the second page's limit controls do not name their key")
	}
	// So does a refused issue (a browser review: it went to the first page).
	if !strings.Contains(body, `<input type="hidden" name="csrf" value="`+csrf+`"><input type="hidden" name="cursor" value="`+cursor[1]+`">`) {
		t.Errorf("the issue form on the second page does not send its cursor")
	}
	status, _, h = g.do(c, "POST", "/console/customers/"+cu.ID+"/keys",
		url.Values{"csrf": {csrf}, "name": {"bad"}, "rpm_limit": {"abc"}, "cursor": {html.UnescapeString(cursor[1])}})
	if status != http.StatusSeeOther || h.Get("Location") != second {
		t.Errorf("a refused issue on the second page = %d to %q; want 303 back to %q", status, h.Get("Location"), second)
	}
	_, names, last := get(next)
	if want := append(seq(51, extra), "main"); !slices.Equal(names, want) || last != "" {
		t.Errorf("the last page of keys: %v, next %q; want %v and no next page", names, last, want)
	}
	// A cursor the API did not make: the error, not every key.
	if body, names, _ = get(keysOf + "&cursor=bogus"); len(names) != 0 || !strings.Contains(body, "cursor") || strings.Contains(body, "No keys") {
		t.Errorf("a bogus cursor: %v", names)
	}

	// The customer page: the first 25 keys, and a link to the rest.
	body, _, _ = get("/console/customers/" + cu.ID)
	var shown []string
	for _, m := range regexp.MustCompile(`<tr><td class="name">(key-[0-9]+|main)</td>`).FindAllStringSubmatch(body, -1) {
		shown = append(shown, m[1])
	}
	m := moreKeys.FindStringSubmatch(body)
	if !slices.Equal(shown, seq(1, 25)) || m == nil || html.UnescapeString(m[1]) != second {
		t.Fatalf("the customer page's keys: %v, more %v; want key-0001 to 25 and a link to %q", shown, m, second)
	}
	// A customer with few keys: all of them, no link.
	few, _, _ := g.customer("few keys", "none", 0)
	if body, _, _ = get("/console/customers/" + few.ID); moreKeys.MatchString(body) || !strings.Contains(body, `<td class="name">main</td>`) {
		t.Errorf("the customer page of a customer with one key links to more keys, or lacks it")
	}
	if body, names, next = get("/console/keys?customer=" + few.ID); !slices.Equal(names, []string{"main"}) || next != "" || strings.Contains(body, "First page") {
		t.Errorf("the keys page of a customer with one key: %v, next %q", names, next)
	}
}
