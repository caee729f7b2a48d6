package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// Portal is the customers' portal, served under /portal/ on the LLM
// listener. A customer signs in with one of its API keys; every page is
// read from the customer API's handler, in-process, with that key, so the
// portal shows exactly what the API shows that key's customer.
type Portal struct {
	self  http.Handler
	log   *slog.Logger
	sess  *sessions
	pages templates
	in    *signinForm
	now   func() time.Time
	// usageLimit is the rows a page of the customer API's usage the usage
	// page asks for (usagePageLimit; tests lower it).
	usageLimit int
}

// usagePageLimit is the rows of a page of usage the portal asks for: the
// customer API's most.
const usagePageLimit = 1000

// NewPortal returns the portal over the customer API's routes (a router
// holding api.Self's Routes).
func NewPortal(self http.Handler, log *slog.Logger) *Portal {
	p := &Portal{self: self, log: log, sess: newSessions("tollgate_portal", "/portal/"),
		pages: parseTemplates("signin", "usage", "requests", "statements", "error"), now: time.Now, usageLimit: usagePageLimit}
	p.in = &signinForm{app: "portal", form: signinData{Field: "key", Label: "API key"},
		empty: "Enter one of your API keys (tg-…).", sess: p.sess, pages: p.pages, log: log, check: p.checkKey}
	return p
}

// Routes adds everything under /portal/ to r.
func (p *Portal) Routes(r chi.Router) {
	p.in.mount(r, func(r chi.Router) {
		r.Get("/", p.usagePage)
		r.Get("/requests", p.requestsPage)
		r.Get("/statements", p.statementsPage)
		r.Get("/statements/{period}.csv", p.statementCSV)
	})
}

// apiError is an answer of the customer API other than 2xx.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return e.Message }

// get calls the customer API with secret and returns the answer's body.
func (p *Portal) get(ctx context.Context, secret, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://customer.in-process"+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := inProcess(p.self).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var env struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
			Detail string `json:"detail"`
			Title  string `json:"title"`
		}
		_ = json.Unmarshal(b, &env)
		msg := env.Error.Message
		if msg == "" {
			msg = strings.TrimSpace(env.Detail + " " + env.Title)
		}
		if msg == "" {
			msg = fmt.Sprintf("the customer API answered %d", resp.StatusCode)
		}
		return nil, &apiError{Status: resp.StatusCode, Message: msg}
	}
	return b, nil
}

// getJSON is get decoding the answer into out.
func (p *Portal) getJSON(ctx context.Context, secret, path string, out any) error {
	b, err := p.get(ctx, secret, path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func (p *Portal) view(r *http.Request, nav, title string, data any) view {
	ss := sessionOf(r)
	return view{App: "portal", Title: title, Nav: nav, CSRF: ss.csrf, Who: ss.who, Data: data}
}

// checkKey checks the key with the customer API: a key it refuses
// (unknown, revoked, expired) cannot sign in. The session is named for the
// key's customer: its id is the subject (names are not unique), its name
// is shown (signinForm.check).
func (p *Portal) checkKey(r *http.Request, key string) (subject, who string, status int, msg string) {
	var st ledger.Statement
	err := p.getJSON(r.Context(), key, "/v1/statements/"+p.now().UTC().Format("2006-01"), &st)
	if err != nil {
		if ae, ok := err.(*apiError); ok && ae.Status == http.StatusUnauthorized {
			return "", "", http.StatusUnauthorized, "That key is unknown, revoked or expired."
		}
		return "", "", http.StatusServiceUnavailable, "The customer API could not check the key: " + errorText(err)
	}
	if st.CustomerID == "" {
		return "", "", http.StatusServiceUnavailable, "The customer API did not say whose key it is."
	}
	return st.CustomerID, st.CustomerName, 0, ""
}

// refuse answers a page whose API call failed: a key revoked since sign-in
// ends the session; input the API refused keeps its 4xx status; anything
// else is the API's failure, 502.
func (p *Portal) refuse(w http.ResponseWriter, r *http.Request, name, nav, title string, err error) {
	if ae, ok := err.(*apiError); ok && ae.Status == http.StatusUnauthorized {
		p.sess.end(w, r)
		http.Redirect(w, r, "/portal/signin?ended=refused", http.StatusSeeOther) // the sign-in page says why
		return
	}
	v := p.view(r, nav, title, nil)
	v.Error = errorText(err)
	status := http.StatusBadGateway
	if ae, ok := err.(*apiError); ok && ae.Status >= 400 && ae.Status < 500 {
		status = ae.Status // the customer's own input was refused (a bad cursor or period): said as such
	}
	p.pages.render(w, p.log, status, "error", v)
}
