package web

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// Console is the operators' web console, served under /console/ on the
// admin listener. It signs operators in with the admin token and calls the
// admin API handler it was given, in-process, with that token, for every
// read and write.
type Console struct {
	admin    http.Handler
	log      *slog.Logger
	sess     *sessions
	pages    templates
	overview *cache[overview]
	recon    *cache[reconciliationData]
	in       *signinForm
	now      func() time.Time
}

// SignedIn reports whether r carries a live console session (its cookie).
// The admin listener reads ahead the bodies of such requests
// (api.Listener.SetTrusted).
func (c *Console) SignedIn(r *http.Request) bool { return c.sess.get(r) != nil }

// NewConsole returns the console over the admin API's handler (api.Admin's
// Handler). maxAge is how long the figures that read the whole ledger
// (the overview's month, the reconciliation of the last day) are reused
// before they are recomputed in the background (0: never reused).
func NewConsole(admin http.Handler, maxAge time.Duration, log *slog.Logger) *Console {
	c := &Console{admin: admin, log: log, sess: newSessions("tollgate_console", "/console/"),
		pages:    parseTemplates("signin", "overview", "customers", "customer", "keys", "issued", "revoke", "prices", "reconciliation", "dlq", "dlqremove", "error"),
		overview: newCache[overview](maxAge), recon: newCache[reconciliationData](maxAge), now: time.Now}
	c.in = &signinForm{app: "console", form: signinData{Field: "token", Label: "Admin token"},
		empty: "Enter the admin token (TOLLGATE_ADMIN_TOKEN).", sess: c.sess, pages: c.pages, log: log, check: c.checkToken,
		resumable: consoleForm}
	return c
}

// Close cancels the background recomputations running, if any, and
// waits for them to end.
func (c *Console) Close() {
	c.overview.close()
	c.recon.close()
}

// Routes adds GET / (a redirect to /console/) and everything under
// /console/ to r.
func (c *Console) Routes(r chi.Router) {
	r.Get("/", func(w http.ResponseWriter, req *http.Request) { http.Redirect(w, req, "/console/", http.StatusFound) })
	c.in.mount(r, func(r chi.Router) {
		r.Get("/", c.overviewPage)
		r.Get("/customers", c.customersPage)
		r.Get("/customers/{id}", c.customerPage)
		r.Get("/customers/{id}/statements/{period}.csv", c.statementCSV)
		r.Post("/customers/{id}/credits", c.addCredit)
		r.Post("/customers/{id}/keys", c.issueKey)
		r.Get("/keys", c.keysPage)
		r.Get("/keys/issued", c.issuedPage)
		r.Post("/keys/{id}/revoke", c.revokeKey)
		r.Post("/keys/{id}/limits", c.setLimits)
		r.Get("/prices", c.pricesPage)
		r.Post("/prices", c.addPrice)
		r.Get("/reconciliation", c.reconciliationPage)
		r.Get("/dlq", c.dlqPage)
		r.Post("/dlq/replay", c.replay)
		r.Post("/dlq/remove", c.removeDeadLetter)
	})
}

// consoleForm is the id (refusedForm's) of the form whose input a POST to
// path sends, "" for one with nothing typed (revoke, replay, remove, sign out).
func consoleForm(path string) string {
	p := strings.Split(strings.TrimPrefix(path, "/console/"), "/")
	switch {
	case path == "/console/prices":
		return "price"
	case len(p) != 3 || p[1] == "":
	case p[0] == "customers" && p[2] == "credits":
		return "credit-" + p[1]
	case p[0] == "customers" && p[2] == "keys":
		return "issue-" + p[1]
	case p[0] == "keys" && p[2] == "limits":
		return "limits-" + p[1]
	}
	return ""
}

// client is the admin API client for the request's session: in-process,
// with the token its operator signed in with, checked then (so that other
// browsers' wrong tokens from its address do not refuse its calls:
// inProcessChecked).
func (c *Console) client(r *http.Request) *api.Client {
	ss := sessionOf(r)
	return api.NewClient("http://admin.in-process", ss.secret, inProcessChecked(c.admin))
}

// view is the layout's fields for a signed-in page. A HEAD's view leaves
// what the last write did for the GET to say (a HEAD is answered unseen:
// a link checker's used it up).
func (c *Console) view(r *http.Request, nav, title string, data any) view {
	ss := sessionOf(r)
	var notice, failure string
	var refused refusedForm
	if r.Method != http.MethodHead {
		notice, failure, refused = c.sess.popFlash(ss)
	}
	return view{App: "console", Title: title, Nav: nav, CSRF: ss.csrf, Who: "operator",
		Notice: notice, Error: failure, Refused: refused, Data: data}
}

// checkToken checks the token with the admin API itself: a token the API
// refuses cannot sign in (signinForm.check).
func (c *Console) checkToken(r *http.Request, token string) (subject, who string, status int, msg string) {
	cl := api.NewClient("http://admin.in-process", token, inProcess(c.admin))
	// Any authenticated read would do: the price list of a model that
	// cannot exist is a small one.
	if _, err := cl.Prices(r.Context(), "(console sign-in)"); err != nil {
		switch ledger.ErrorCode(err) {
		case ledger.EUnauthorized:
			return "", "", http.StatusUnauthorized, "That is not the admin token."
		case ledger.ERateLimited: // too many wrong tokens from this browser's address
			return "", "", http.StatusTooManyRequests, "Not checked: " + errorText(err) + "."
		}
		return "", "", http.StatusServiceUnavailable, "The admin API could not check the token: " + errorText(err)
	}
	return "operator", "operator", 0, ""
}

// queryStatus is the status of a page whose query the API refused with
// err: 400 for input it cannot take (a cursor it did not make, an id that
// is not one, a range that is none), 404 for something that does not
// exist, and otherwise (no error, or the API's own failure) what the
// caller gives: 200 for a page, which says the failure while still
// showing what it could read.
func queryStatus(err error, otherwise int) int {
	switch ledger.ErrorCode(err) {
	case ledger.EInvalid:
		return http.StatusBadRequest
	case ledger.ENotFound:
		return http.StatusNotFound
	}
	return otherwise
}

// done redirects after a write to path, leaving in the session what
// happened (notice) or why it failed (err) for the next page to say.
func (c *Console) done(w http.ResponseWriter, r *http.Request, path, notice string, err error) {
	ss := sessionOf(r)
	if err != nil {
		c.sess.setFlash(ss, "", errorText(err))
	} else {
		c.sess.setFlash(ss, notice, "")
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}
