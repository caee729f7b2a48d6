package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
)

//go:embed assets
var assets embed.FS

// view is what every page template gets: the layout's fields and the
// page's own Data.
type view struct {
	App    string // "console" or "portal"
	Title  string
	Nav    string // the nav item of this page
	CSRF   string // the session's CSRF token, for the forms that write
	Who    string // who is signed in ("" on the sign-in page)
	Notice string // what the last write did
	Error  string // why the last action failed
	// Refresh, when not 0, makes the page reload itself after that many
	// seconds (a figure still being computed).
	Refresh int
	// Refused is the form the last write was refused for, to show filled
	// in as it was sent, its error beside its field.
	Refused refusedForm
	// SignedOut is the sign-in page that "Sign out" leads to: it loads
	// signed-out.css, whose answer changes the session cookie once the
	// browser has put the page signed out of in its back/forward cache,
	// which drops it from there (signinForm.signedOutStyle).
	SignedOut bool
	Data      any
}

// templates holds one parsed set per page: the layout plus the page.
type templates map[string]*template.Template

var funcs = template.FuncMap{
	"num":  formatInt,
	"str":  func(p *string) string { return deref(p) },
	"day":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
	"dayp": func(t *time.Time) string { return optionalTime(t) },
	"i64p": func(p *int64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatInt(*p, 10)
	},
	// expired reports whether a key's expiry (nil: none) is not after now.
	"expired": func(exp *time.Time, now time.Time) bool { return exp != nil && !exp.After(now) },
	"join":    strings.Join,
	"nonce":   randomToken,
	"pct":     func(bp int) string { return decimal.New(int64(bp), -2).String() + "%" },
	"rows":    func(label string, rows any) map[string]any { return map[string]any{"Label": label, "Rows": rows} },
	"rowCost": rowCost,
	"eventCost": func(e ledger.RatedEvent) string {
		if e.Unpriced && e.Currency == "" { // not priced by a re-rating since
			return notPriced
		}
		return e.Cost + " " + e.Currency
	},
	// limitsShown and limitNames are a key's limits form's values, by
	// field, and its fields' names (see keyLimits).
	"limitsShown": keyLimitsShown,
	"limitNames":  keyLimitNames,
}

// notPriced is what a page shows for the cost of usage no price rated
// yet: stored at cost 0 until a price is added and a re-rating charges
// it, so not free.
const notPriced = "not priced yet"

// rowCost is a usage row's cost as a page shows it: "2 USD", with its
// requests not priced yet said apart, "2 USD (1 request not priced yet)",
// and "not priced yet" for a row of nothing else (no currency).
func rowCost(r ledger.UsageRow) string {
	switch {
	case r.UnpricedRequests == 0:
		return r.Cost + " " + r.Currency
	case r.Currency == "":
		return notPriced
	case r.UnpricedRequests == 1:
		return r.Cost + " " + r.Currency + " (1 request " + notPriced + ")"
	}
	return r.Cost + " " + r.Currency + " (" + formatInt(r.UnpricedRequests) + " requests " + notPriced + ")"
}

func parseTemplates(pages ...string) templates {
	t := templates{}
	for _, p := range pages {
		t[p] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/chart.html", "assets/"+p+".html"))
	}
	return t
}

// render writes the page, or a plain 500 when the template fails (before
// any byte was sent: pages render into a buffer).
func (ts templates) render(w http.ResponseWriter, log *slog.Logger, status int, name string, v view) {
	var buf bytes.Buffer
	if err := ts[name].Execute(&buf, v); err != nil {
		log.Error("web: render", "page", name, "err", err)
		http.Error(w, "internal error; see the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// secure sets the headers every answer of both interfaces carries: no
// script, styles and forms only from here, no framing, nothing cached.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin") // "no-referrer" makes browsers send Origin: null on form posts
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// favicon serves the icon the layout names: without one, browsers ask
// for /favicon.ico, which neither listener has, and every page logged a
// 404 in the browser's console.
func favicon(w http.ResponseWriter, _ *http.Request) {
	b, _ := assets.ReadFile("assets/favicon.svg")
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "max-age=3600")
	_, _ = w.Write(b)
}

// style serves the stylesheet.
func style(w http.ResponseWriter, _ *http.Request) {
	b, _ := assets.ReadFile("assets/style.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=3600")
	_, _ = w.Write(b)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func optionalTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04")
}

// formatInt writes n with thin groups of three: 1234567 → "1,234,567".
func formatInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// amounts sums decimal amounts per currency, exactly.
type amounts map[string]*big.Rat

func (a amounts) add(currency, amount string) {
	r, ok := new(big.Rat).SetString(amount)
	if !ok || currency == "" {
		return
	}
	if a[currency] == nil {
		a[currency] = new(big.Rat)
	}
	a[currency].Add(a[currency], r)
}

// String shows each currency's sum ("12.5 USD · 3 EUR"), "0" for none.
func (a amounts) String() string {
	if len(a) == 0 {
		return "0"
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(a)) {
		parts = append(parts, exact(a[c])+" "+c)
	}
	return strings.Join(parts, " · ")
}

// inexactDecimals is how many decimals exact shows of a rational with no
// finite decimal expansion (its denominator has a prime factor other
// than 2 and 5), after "≈". Sums of the API's decimal amounts always have
// one; this bound is for anything else.
const inexactDecimals = 18

// exact formats a rational as a decimal with no trailing zeros: all its
// digits when it has a finite decimal expansion (every sum of the API's
// decimal amounts does: 0.0009556477553321, 1e-16 as 0.0000000000000001),
// else rounded to inexactDecimals decimals and marked "≈".
func exact(r *big.Rat) string {
	decimals, finite := finiteDecimals(r.Denom())
	prefix := ""
	if !finite {
		decimals, prefix = inexactDecimals, "≈"
	}
	s := r.FloatString(decimals)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return prefix + s
}

// finiteDecimals returns how many decimals a fraction with denominator d
// (above 0) needs, and whether that is finite: it is when d is 2^a·5^b,
// and then it is max(a, b).
func finiteDecimals(d *big.Int) (int, bool) {
	d = new(big.Int).Set(d)
	var m big.Int
	count := func(p int64) int {
		n, bp := 0, big.NewInt(p)
		for {
			q, _ := new(big.Int).QuoRem(d, bp, &m)
			if m.Sign() != 0 {
				return n
			}
			d, n = q, n+1
		}
	}
	twos, fives := count(2), count(5)
	return max(twos, fives), d.Cmp(big.NewInt(1)) == 0
}

// periods returns the n UTC months ending with now's, newest first ("2026-01").
func periods(now time.Time, n int) []string {
	m := time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	out := make([]string, n)
	for i := range out {
		out[i] = m.AddDate(0, -i, 0).Format("2006-01")
	}
	return out
}

// monthStart and dayStart are the UTC month's and day's first instants.
func monthStart(now time.Time) time.Time {
	return time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
}

func dayStart(now time.Time) time.Time { return now.UTC().Truncate(24 * time.Hour) }

// errorText is what a page says about an API error.
func errorText(err error) string { return fmt.Sprint(err) }
