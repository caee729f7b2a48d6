package web

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/tollgate-dev/tollgate/ledger/api"
)

// signinForm is the sign-in of one app, the console or the portal: its
// form, the form's checks, the session it starts, signing out, and the
// routes around the app's pages. Only how the secret entered is checked
// differs between the apps.
type signinForm struct {
	app   string     // "console" or "portal": the layout's App; its pages are under /<app>/
	form  signinData // the secret's field and label
	empty string     // the message when the field is left empty
	sess  *sessions
	pages templates
	log   *slog.Logger
	// check asks the app's API whether secret may sign in. It returns the
	// session's subject (whose sessions are counted together: a unique id)
	// and the name its pages show; or, refused, the HTTP status and the
	// message to answer with (status 0: accepted).
	check func(r *http.Request, secret string) (subject, who string, status int, msg string)
	// resumable, when not nil, names the form a POST to path sends (its
	// refusedForm id), "" for none whose input is worth keeping: a form
	// sent after the session ended is carried through the sign-in page,
	// and the page it was on shows it filled in as it was typed.
	resumable func(path string) string
}

// signinData is the sign-in form: the password field's name and label,
// and Next, the page of the app to go to once signed in ("": its first).
// ResumePath and Resume are a form sent after the session ended: the path
// it was sent to and its fields as sent (URL-encoded, without the CSRF
// token), for the page it was on to show filled in once signed in ("":
// none).
//
// Refused is whether the secret sent was refused (wrong, or none): its
// field is then marked invalid.
type signinData struct {
	Field, Label, Next, ResumePath, Resume string
	Refused                                bool
}

// mount adds the app to r under /<app>/ (GET /<app> redirects there), every
// answer with the security headers: its style sheet and sign-in open to
// all, and signing out and the pages that pages adds (paths below /<app>)
// to signed-in browsers only.
func (f *signinForm) mount(r chi.Router, pages func(r chi.Router)) {
	root := "/" + f.app
	r.Get(root, func(w http.ResponseWriter, req *http.Request) { http.Redirect(w, req, root+"/", http.StatusFound) })
	r.Route(root, func(r chi.Router) {
		// A HEAD is answered as the GET of its path, without the body
		// (net/http drops it): link checkers and uptime probes send HEAD.
		r.Use(middleware.GetHead, secure, limitBody, browserAddr, f.wholeQuery)
		r.NotFound(f.missing(http.StatusNotFound, func(r *http.Request) string { return "There is no page at " + r.URL.Path + "." }))
		r.MethodNotAllowed(f.missing(http.StatusMethodNotAllowed, func(r *http.Request) string {
			return "The page " + r.URL.Path + " does not take a " + r.Method + " request."
		}))
		r.Get("/static/style.css", style)
		r.Get("/static/favicon.svg", favicon)
		r.Get("/static/signed-out.css", f.signedOutStyle)
		r.Get("/signin", f.page)
		r.Post("/signin", f.signin)
		r.Group(func(r chi.Router) {
			r.Use(f.sess.require(f.ended, f.stale, f.refuse))
			r.Post("/signout", f.signout)
			pages(r)
		})
	})
}

// missing answers a path under /<app>/ that no page has (404), or a page
// asked for with a method it does not take (405), with the app's error
// page rather than net/http's plain text, saying what say says of the
// request. A signed-in browser gets the app's navigation.
func (f *signinForm) missing(status int, say func(*http.Request) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { f.refuse(w, r, status, say(r)) }
}

// refuse answers a request the app does not act on with its error page,
// status and msg, rather than net/http's plain text: a signed-in browser
// gets the app's navigation, the way back.
func (f *signinForm) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := view{App: f.app, Title: http.StatusText(status), Error: msg}
	if ss := f.sess.get(r); ss != nil {
		v.Who, v.CSRF = ss.who, ss.csrf
	}
	f.pages.render(w, f.log, status, "error", v)
}

// page is GET /<app>/signin: the form, or the app for a browser signed in.
func (f *signinForm) page(w http.ResponseWriter, r *http.Request) {
	next := f.next(r.URL.Query().Get("next"))
	if f.sess.get(r) != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	v := view{App: f.app, Title: "Sign in", Data: f.form}
	if next != "/"+f.app+"/" {
		form := f.form
		form.Next = next
		v.Data, v.Notice = form, "Sign in to see that page; you will be taken to it."
	}
	if r.URL.Query().Get("signed_out") == "1" {
		v.SignedOut, v.Notice = true, "You are signed out."
	}
	if r.URL.Query().Get("ended") == "refused" {
		v.Notice = "Your session ended: what it signed in with no longer signs in (revoked or expired). Sign in again."
	}
	f.pages.render(w, f.log, http.StatusOK, "signin", v)
}

// next is where a sign-in goes once done: next, a page of the app's
// (/<app>/..., a path alone: no other site, nor the sign-in page), or the
// app's first page.
func (f *signinForm) next(next string) string {
	root := "/" + f.app + "/"
	u, err := url.Parse(next)
	switch {
	case err != nil, u.Scheme != "", u.Host != "", u.User != nil, u.Opaque != "",
		!strings.HasPrefix(next, root), strings.ContainsAny(next, "\\\r\n"),
		strings.HasPrefix(u.Path, root+"signin"),
		path.Clean(u.Path) != u.Path && path.Clean(u.Path)+"/" != u.Path: // no dot segments
		return root
	}
	return next
}

// sessionEnded is what the sign-in page says to a browser that sent a
// form without a live session.
const sessionEnded = "Your session has ended (or you signed out), so what you sent was not done. Sign in, then send it again."

// ended answers a request that needs a session and has none, other than
// a GET (which require sends to the sign-in page): a form posted after the
// session ended. It was not acted on; the sign-in form says so (401).
func (f *signinForm) ended(w http.ResponseWriter, r *http.Request) {
	// Signed in again, back to the page the form was on (its Referer, of
	// this app on this host) to send it again: it went to the first page.
	form := f.form
	if next, ok := f.sentFrom(r); ok && next != "/"+f.app+"/" {
		form.Next = next
	}
	msg := sessionEnded
	if f.resumable != nil && f.resumable(r.URL.Path) != "" && fromHere(r) && parseForm(r) == nil {
		// What was typed is kept, in the sign-in form (the browser has no
		// session to keep it in): it came back empty, all of it to type
		// again.
		form.ResumePath, form.Resume = r.URL.Path, asTyped(r.PostForm).Encode()
		msg = sessionEndedKept
	}
	f.pages.render(w, f.log, http.StatusUnauthorized, "signin", view{App: f.app, Title: "Sign in", Error: msg, Data: form})
}

// formStale is what the page says of a form filled in again after it
// came with another session's CSRF token (signinForm.stale).
const formStale = "This form came from a page loaded before you signed in again, so it was not sent. It is filled in as you typed it: check it and send it again."

// stale answers a form posted from a page of this site (fromHere) with a
// CSRF token other than its live session's: a page loaded before the
// operator signed in again (in another tab). It is not acted on; when its
// input is worth keeping (resumable) and its Referer is a page of this
// app, that page shows it filled in as it was typed, saying so (303 back
// there), as a form kept through a sign-in is; else it reports false,
// and the request is refused (403).
func (f *signinForm) stale(w http.ResponseWriter, r *http.Request, ss *session) bool {
	if f.resumable == nil || f.resumable(r.URL.Path) == "" {
		return false
	}
	back, ok := f.sentFrom(r)
	if !ok {
		return false
	}
	f.sess.setRefused(ss, refusedForm{form: f.resumable(r.URL.Path), values: asTyped(r.PostForm)})
	f.sess.setFlash(ss, formStale, "")
	http.Redirect(w, r, back, http.StatusSeeOther)
	return true
}

// sentFrom is the page of this app a form was sent from, by its Referer
// (f.next's rules: the app's first page for anything else of this host);
// false when the Referer is missing or names another host.
func (f *signinForm) sentFrom(r *http.Request) (string, bool) {
	ref, err := url.Parse(r.Referer())
	if err != nil || ref.Host != r.Host {
		return "", false
	}
	return f.next(ref.RequestURI()), true
}

// fromHere reports whether a posted form says it came from a page of this
// host: an Origin header naming it (browsers send one with every POST),
// and no Sec-Fetch-Site other than same-origin. Only such a form is kept
// through the sign-in: another site's, kept, would be shown in the
// operator's form as theirs to send again.
func fromHere(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return r.Header.Get("Origin") != "" && sameOrigin(r) && (site == "" || site == "same-origin")
}

// sessionEndedKept is sessionEnded for a form whose input is kept.
const sessionEndedKept = "Your session has ended (or you signed out), so what you sent was not done. Sign in, then send it again: the form will be filled in as you typed it."

// formNotSent is what the page says of a form filled in again after a
// sign-in (signinForm.resumable).
const formNotSent = "Your session had ended, so this form was not sent. It is filled in as you typed it: check it and send it again."

// carried is the sign-in form as posted: where it goes next and the form
// it carries (signinData.Resume; only from a page of this host, fromHere),
// for the page that answers it.
func (f *signinForm) carried(r *http.Request) signinData {
	form := f.form
	if next := f.next(r.PostFormValue("next")); next != "/"+f.app+"/" {
		form.Next = next
	}
	if path := r.PostFormValue("resume_path"); f.resumable != nil && f.resumable(path) != "" && fromHere(r) {
		form.ResumePath, form.Resume = path, r.PostFormValue("resume")
	}
	return form
}

// signin is POST /<app>/signin: a form posted from this site with a secret
// that check accepts starts a session; anything else shows the form again
// with why.
func (f *signinForm) signin(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		// A mistyped secret keeps where the sign-in goes and what it
		// carries: they were dropped, the page asked for and the form
		// sent lost to one typo.
		// The field is described by the error (an alert on a page just
		// loaded is not read out; the focused field is) and, when the
		// secret was refused, marked invalid.
		form := f.carried(r)
		form.Refused = status == http.StatusUnauthorized
		f.pages.render(w, f.log, status, "signin", view{App: f.app, Title: "Sign in", Error: msg, Data: form})
	}
	if err := parseForm(r); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(http.StatusRequestEntityTooLarge, "refused: the form is larger than a sign-in form can be")
			return
		}
		fail(http.StatusBadRequest, "refused: the form could not be read: "+err.Error())
		return
	}
	secret := strings.TrimSpace(r.PostFormValue(f.form.Field))
	if !sameOrigin(r) {
		fail(http.StatusForbidden, "refused: the form was posted from another site")
		return
	}
	if secret == "" {
		fail(http.StatusUnauthorized, f.empty)
		return
	}
	subject, who, status, msg := f.check(r, secret)
	if status != 0 {
		fail(status, msg)
		return
	}
	ss := f.sess.start(w, r, secret, subject, who)
	if form := f.carried(r); form.ResumePath != "" {
		if values, err := url.ParseQuery(form.Resume); err == nil {
			f.sess.setRefused(ss, refusedForm{form: f.resumable(form.ResumePath), values: asTyped(values)})
			f.sess.setFlash(ss, formNotSent, "")
		}
	}
	http.Redirect(w, r, f.next(r.PostFormValue("next")), http.StatusSeeOther)
}

// signout is POST /<app>/signout: the session ends, and the browser goes
// to the sign-in page that says so (and loads signed-out.css).
func (f *signinForm) signout(w http.ResponseWriter, r *http.Request) {
	f.sess.end(w, r)
	http.Redirect(w, r, "/"+f.app+"/signin?signed_out=1", http.StatusSeeOther)
}

// signedOutStyle is GET /<app>/static/signed-out.css, an empty style sheet
// that the page after "Sign out" loads, never from a cache. Its answer
// sets the session cookie, empty, for a second, when the browser has no
// session (it never ends one): a change of an HttpOnly cookie made after
// the browser put the page signed out of in its back/forward cache, which
// then drops it, so that Back loads it again (and is asked to sign in)
// rather than showing it as it was. Chromium keeps pages served with
// Cache-Control: no-store there unless such a cookie changes while they
// are in it, and the sign-out's own clearing of the cookie, made as the
// page is put there, was seen in time in some runs only.
func (f *signinForm) signedOutStyle(w http.ResponseWriter, r *http.Request) {
	if f.sess.get(r) == nil {
		http.SetCookie(w, &http.Cookie{Name: f.sess.cookie, Value: "", Path: f.sess.path, MaxAge: 1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
}

// wholeQuery refuses (400) a request whose query string does not parse
// whole (api.QueryStringError): url.Values drops what does not parse, and
// a page would show what it was not asked for (the first page of a list
// asked for its next one).
func (f *signinForm) wholeQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := api.QueryStringError(r.URL.RawQuery); err != nil {
			f.refuse(w, r, http.StatusBadRequest, "The address's query cannot be read: "+err.Error()+".")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxFormBytes bounds a form's body: the console's and portal's forms are
// a few hundred bytes (the sign-in form is open to anyone, on the LLM
// listener, where nothing else bounds a body).
const maxFormBytes = 64 << 10

// limitBody bounds every request body of an app at maxFormBytes: reading
// past it fails with *http.MaxBytesError.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		next.ServeHTTP(w, r)
	})
}

// parseForm reads a posted form, URL-encoded or multipart, within the
// body's bound (limitBody), returning the error that stopped it.
func parseForm(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/form-data") {
		err := r.ParseMultipartForm(maxFormBytes)
		if r.MultipartForm != nil {
			_ = r.MultipartForm.RemoveAll()
		}
		return err
	}
	return r.ParseForm()
}
