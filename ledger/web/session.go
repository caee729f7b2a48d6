package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// sessionTTL is how long a session lasts after sign-in, whatever is done
// with it.
const sessionTTL = 8 * time.Hour

// maxSessions bounds the sessions held; signing in beyond it drops the
// oldest.
const maxSessions = 10000

// maxSubjectSessions bounds the sessions of one subject (one customer on
// the portal, the operator on the console): signing in beyond it drops
// that subject's oldest, so that no one subject fills the store and signs
// the others out.
const maxSubjectSessions = 100

// session is one signed-in browser: the credential it signed in with
// (kept here, never sent to the browser), its CSRF token and its expiry.
type session struct {
	id, csrf string
	secret   string // the admin token (console) or the API key (portal)
	subject  string // who signed in: "operator", or the customer's id
	who      string // the name the pages show for subject
	expires  time.Time
	// notice and failure are what the last write did, said once by the
	// next page (guarded by sessions.mu).
	notice, failure string
	// refused is the form the last write was refused for, shown filled
	// in by the next page (guarded by sessions.mu).
	refused refusedForm
	// issued is a key the console just issued, its secret shown once by
	// the page the issue redirects to (guarded by sessions.mu).
	issued *issuedData
	// issueMu makes one issue of a key at a time; issuedBy is the keys
	// issued by each form (its form_id) under it (see issueOnce).
	issueMu  sync.Mutex
	issuedBy []formIssue
	// doneMu makes one write of a form sent with a form_id at a time
	// (other than a key's issue); doneBy is what each such form did (see
	// doOnce).
	doneMu sync.Mutex
	doneBy []formDone
}

// formDone is what a form sent with a form_id did: its notice.
type formDone struct {
	formID, notice string
}

// formIssue is a key the console issued for one rendering of the issue
// form (its form_id), and when.
type formIssue struct {
	formID string
	key    issuedData
	at     time.Time
}

// Bounds of what a session remembers of the keys it issued: the forms,
// and how long the secret of one is kept to be shown again to the same
// form sent twice (a double click, the browser's resend).
const (
	maxFormIssues  = 64
	formIssueShown = 2 * time.Minute
)

// sessions is an in-memory session store, one per interface.
type sessions struct {
	cookie, path string
	now          func() time.Time
	mu           sync.Mutex
	m            map[string]*session
}

func newSessions(cookie, path string) *sessions {
	return &sessions{cookie: cookie, path: path, now: time.Now, m: map[string]*session{}}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// start makes a session for secret and sets its cookie on w.
func (s *sessions) start(w http.ResponseWriter, r *http.Request, secret, subject, who string) *session {
	now := s.now()
	ss := &session{id: randomToken(), csrf: randomToken(), secret: secret, subject: subject, who: who, expires: now.Add(sessionTTL)}
	s.mu.Lock()
	var oldest, oldestOwn *session
	own := 0
	for id, o := range s.m {
		switch {
		case !now.Before(o.expires):
			delete(s.m, id)
			continue
		case oldest == nil || o.expires.Before(oldest.expires):
			oldest = o
		}
		if o.subject == subject {
			own++
			if oldestOwn == nil || o.expires.Before(oldestOwn.expires) {
				oldestOwn = o
			}
		}
	}
	switch {
	case own >= maxSubjectSessions:
		delete(s.m, oldestOwn.id)
	case len(s.m) >= maxSessions && oldest != nil:
		delete(s.m, oldest.id)
	}
	s.m[ss.id] = ss
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: ss.id, Path: s.path, Expires: ss.expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
	return ss
}

// overTLS reports whether the browser's request came over TLS: to this
// server, or to the TLS-terminating proxy in front of it, which says so
// in X-Forwarded-Proto (its first value is the client's side). A client
// that sends the header itself only makes its cookie Secure, which a
// browser on plain HTTP then drops: it weakens nothing.
func overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// get returns the request's live session, or nil.
func (s *sessions) get(r *http.Request) *session {
	c, err := r.Cookie(s.cookie)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[c.Value]
	if ss == nil {
		return nil
	}
	if !s.now().Before(ss.expires) {
		delete(s.m, ss.id)
		return nil
	}
	return ss
}

// end forgets the request's session and clears its cookie.
func (s *sessions) end(w http.ResponseWriter, r *http.Request) {
	if ss := s.get(r); ss != nil {
		s.mu.Lock()
		delete(s.m, ss.id)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: "", Path: s.path, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
}

// validCSRF reports whether the POSTed form carries the session's CSRF
// token (compared in constant time).
func validCSRF(r *http.Request, ss *session) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
}

// sameOrigin reports whether a request's Origin header, when it has one,
// names the host it was sent to (a cross-site form post does not).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// setFlash keeps what a write did for the session's next page.
func (s *sessions) setFlash(ss *session, notice, failure string) {
	s.mu.Lock()
	ss.notice, ss.failure = notice, failure
	s.mu.Unlock()
}

// setRefused keeps a refused form for the session's next page.
func (s *sessions) setRefused(ss *session, f refusedForm) {
	s.mu.Lock()
	ss.refused = f
	s.mu.Unlock()
}

// popFlash returns and forgets what the last write did, and the form
// it refused, if any.
func (s *sessions) popFlash(ss *session) (notice, failure string, refused refusedForm) {
	s.mu.Lock()
	defer s.mu.Unlock()
	notice, failure, refused = ss.notice, ss.failure, ss.refused
	ss.notice, ss.failure, ss.refused = "", "", refusedForm{}
	return notice, failure, refused
}

// setIssued keeps a key just issued for the session's next view of the
// issued page.
func (s *sessions) setIssued(ss *session, k *issuedData) {
	s.mu.Lock()
	ss.issued = k
	s.mu.Unlock()
}

// issueOnce issues a key for the form formID by issue, once per form: a
// form sent again while its first sending is still issuing waits for it,
// and gets the key the first issued (resent), its secret shown again if
// it was issued less than formIssueShown ago (nil otherwise: the secret is
// no longer kept, and the caller says the form already issued a key). A
// formID of "" (a form without one) issues every time.
func (s *sessions) issueOnce(ss *session, formID string, issue func() (*issuedData, error)) (k *issuedData, resent bool, err error) {
	if formID == "" {
		k, err = issue()
		return k, false, err
	}
	ss.issueMu.Lock()
	defer ss.issueMu.Unlock()
	s.mu.Lock()
	now := s.now()
	for i := range ss.issuedBy {
		if f := &ss.issuedBy[i]; now.Sub(f.at) >= formIssueShown {
			f.key.Secret = "" // past the window: not kept, only the form's id
		}
	}
	for _, f := range ss.issuedBy {
		if f.formID == formID {
			var again *issuedData
			if f.key.Secret != "" {
				kept := f.key
				again = &kept
			}
			s.mu.Unlock()
			return again, true, nil
		}
	}
	s.mu.Unlock()
	if k, err = issue(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	if len(ss.issuedBy) >= maxFormIssues {
		ss.issuedBy = append(ss.issuedBy[:0], ss.issuedBy[1:]...)
	}
	ss.issuedBy = append(ss.issuedBy, formIssue{formID: formID, key: *k, at: s.now()})
	s.mu.Unlock()
	return k, false, nil
}

// doOnce runs write for the form formID names (its form_id, one per
// rendering of the form), once: sent again (a double click, the browser's
// resend), even while the first sending is still being written, the form
// is not written again and doOnce returns the notice its first sending
// returned, with resent true. A write that fails is not remembered, so a
// refused form may be sent again. Without a form_id, write is run.
func (s *sessions) doOnce(ss *session, formID string, write func() (notice string, err error)) (notice string, resent bool, err error) {
	if formID == "" {
		notice, err = write()
		return notice, false, err
	}
	ss.doneMu.Lock()
	defer ss.doneMu.Unlock()
	s.mu.Lock()
	for _, f := range ss.doneBy {
		if f.formID == formID {
			s.mu.Unlock()
			return f.notice, true, nil
		}
	}
	s.mu.Unlock()
	if notice, err = write(); err != nil {
		return "", false, err
	}
	s.mu.Lock()
	if len(ss.doneBy) >= maxFormIssues {
		ss.doneBy = append(ss.doneBy[:0], ss.doneBy[1:]...)
	}
	ss.doneBy = append(ss.doneBy, formDone{formID: formID, notice: notice})
	s.mu.Unlock()
	return notice, false, nil
}

// popIssued returns and forgets the key just issued, or nil; with keep,
// it returns it and keeps it (a HEAD, answered unseen).
func (s *sessions) popIssued(ss *session, keep bool) *issuedData {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ss.issued
	if !keep {
		ss.issued = nil
	}
	return k
}

type sessionKey struct{}

// require lets a request with a live session through, with the session
// in its context (sessionOf); others go to the sign-in page (GET, HEAD)
// or are answered by ended (a form posted after the session ended). A
// POST must carry the session's CSRF token and no foreign Origin (403);
// one from a page of this site with another token (loaded before a new
// sign-in) is answered by stale, which may keep it, and returns false
// when it does not. Refusals are answered by refuse (the app's error page).
func (s *sessions) require(ended http.HandlerFunc, stale func(http.ResponseWriter, *http.Request, *session) bool,
	refuse func(w http.ResponseWriter, r *http.Request, status int, msg string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ss := s.get(r)
			if ss == nil {
				if r.Method == http.MethodGet || r.Method == http.MethodHead {
					// Back to this page once signed in (a browser review:
					// a link to page 2 of a customer's keys, followed
					// signed out, ended on the overview).
					to := s.path + "signin"
					if uri := r.URL.RequestURI(); uri != s.path {
						to += "?next=" + url.QueryEscape(uri)
					}
					http.Redirect(w, r, to, http.StatusSeeOther)
					return
				}
				ended(w, r)
				return
			}
			if r.Method == http.MethodPost && !formRead(w, r, refuse) {
				return
			}
			if r.Method == http.MethodPost && (!sameOrigin(r) || !validCSRF(r, ss)) {
				if fromHere(r) && stale(w, r, ss) {
					return
				}
				refuse(w, r, http.StatusForbidden, "Not done: the form's CSRF token is missing or wrong. Reload the page and try again.")
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss)))
		})
	}
}

// formRead reads a posted form within its bound (limitBody), answering
// (by refuse) 413 when the body is larger and 400 when it cannot be read,
// and reports whether it could: a form cut off at the bound is not taken
// for one without its CSRF token.
func formRead(w http.ResponseWriter, r *http.Request, refuse func(http.ResponseWriter, *http.Request, int, string)) bool {
	err := parseForm(r)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooBig):
		refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("Not done: the form is larger than %d KiB.", tooBig.Limit>>10))
	default:
		// What net/http says of it ("multipart: NextPart: EOF") is not
		// for people; a browser's form always reads.
		refuse(w, r, http.StatusBadRequest, "Not done: the form could not be read (it is not one this page sends). Reload the page and try again.")
	}
	return false
}

// sessionOf is the session require put in r's context.
func sessionOf(r *http.Request) *session { return r.Context().Value(sessionKey{}).(*session) }
