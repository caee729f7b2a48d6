package web

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// keysPerPage is how many keys the keys page lists (each with its forms),
// and the customer page the first of.
const keysPerPage = 25

type keysData struct {
	// Customers are a page of those to choose from, when none is chosen:
	// those matching Query. First and Next are the links to the first and
	// the next page of those customers, or of the chosen customer's keys
	// ("" when there is none).
	Customers   []ledger.Customer
	Query       string
	First, Next string
	Customer    *ledger.Customer
	// Keys are one page of the chosen customer's keys, keysPerPage of
	// them, oldest first, after Cursor (the API's next_cursor; "": the
	// first page), which the key forms send back so that their answer
	// returns to this page.
	Keys   []ledger.Key
	Cursor string
	Now    time.Time // what a key's expiry is compared with (expired or active)
}

// keysPage lists one page of a customer's keys (?customer=ID, after
// ?cursor=, the API's next_cursor) with the forms to issue, revoke and
// limit them, and links to the first and the next page; without a
// customer, a page of the customers to choose from (?q= and ?cursor= as
// on the customers page: it listed every customer in one select). Only
// that page of keys is read from the API: it read and rendered every key,
// and with 100,000 keys a page was 239 MB and took 16.5 s.
func (c *Console) keysPage(w http.ResponseWriter, r *http.Request) {
	cl, ctx := c.client(r), r.Context()
	d := keysData{Now: c.now()}
	var err error
	if id := r.URL.Query().Get("customer"); id != "" {
		var cu ledger.Customer
		if cu, err = cl.Customer(ctx, id); err == nil {
			d.Customer = &cu
			d.Cursor = r.URL.Query().Get("cursor")
			if d.Cursor != "" {
				d.First = keysLink(id, "")
			}
			var page ledger.KeyPage
			page, err = cl.KeysPage(ctx, id, ledger.KeyQuery{Limit: keysPerPage, Cursor: d.Cursor})
			d.Keys = page.Data
			if page.NextCursor != "" {
				d.Next = keysLink(id, page.NextCursor)
			}
		}
	} else {
		d.Query = strings.TrimSpace(r.URL.Query().Get("q"))
		d.First = firstPage(r, "/console/keys", d.Query)
		d.Customers, d.Next, err = c.customerChoice(r, "/console/keys", d.Query)
	}
	v := c.view(r, "keys", "Keys", d)
	if d.Customer != nil {
		v.Title = "Keys of " + d.Customer.Name
	}
	if err != nil {
		v.Error = errorText(err)
	}
	c.pages.render(w, c.log, queryStatus(err, http.StatusOK), "keys", v)
}

// keysLink is the keys page of customer's keys after cursor (the API's
// next_cursor; "": the first page).
func keysLink(customer, cursor string) string {
	v := url.Values{"customer": {customer}}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	return "/console/keys?" + v.Encode()
}

// keysBack is the keys page a key form (revoke, limits; issue when
// refused) returns to: the
// page of its customer's keys it was sent from (its customer and cursor
// fields).
func keysBack(r *http.Request) string {
	return keysLink(r.PostFormValue("customer"), r.PostFormValue("cursor"))
}

type issuedData struct {
	CustomerID, Name, Secret, Prefix string
}

// issueKey creates a key through the API and shows its secret, this once.
func (c *Console) issueKey(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	in := ledger.KeyInput{Name: strings.TrimSpace(r.PostFormValue("name"))}
	var err error
	if in.RPMLimit, err = optionalInt(r, "rpm_limit"); err == nil {
		if in.TPMLimit, err = optionalInt(r, "tpm_limit"); err == nil {
			if in.MaxConcurrent, err = optionalInt(r, "max_concurrent"); err == nil {
				in.ExpiresAt, err = optionalDate(r, "expires_at")
			}
		}
	}
	in.DailyLimit, in.MonthlyLimit = optionalAmount(r, "daily_limit"), optionalAmount(r, "monthly_limit")
	in.AllowedModels = modelList(r.PostFormValue("allowed_models"))
	back := keysLink(id, r.PostFormValue("cursor")) // a refusal returns to the page the form was on
	if err != nil {
		c.refuse(w, r, back, "issue-"+id, issueForm, err)
		return
	}
	// One key per form shown: a double click sends the form twice, and
	// each sending issued a live key, the operator seeing the secret of
	// only the second (a review).
	ss := sessionOf(r)
	k, resent, err := c.sess.issueOnce(ss, r.PostFormValue("form_id"), func() (*issuedData, error) {
		k, err := c.client(r).CreateKey(r.Context(), id, in)
		if err != nil {
			return nil, err
		}
		return &issuedData{CustomerID: id, Name: k.Name, Secret: k.Secret, Prefix: k.Prefix}, nil
	})
	switch {
	case err != nil:
		c.refuse(w, r, back, "issue-"+id, issueForm, err)
		return
	case k == nil: // resent after its secret was let go
		c.done(w, r, back, "", errors.New("that form already issued a key, whose secret was shown once; "+
			"to issue another key, fill in the form on this page"))
		return
	case resent && k.CustomerID != id: // the form's id sent to another customer's address
		c.done(w, r, back, "", errors.New("that form already issued a key for another customer"))
		return
	}
	// Post, redirect, get: the secret is shown by a GET, once. Rendered
	// as the POST's answer, a reload of it (or the browser's "resend")
	// issued a second live key, the operator seeing only its secret (a
	// review).
	c.sess.setIssued(ss, k)
	http.Redirect(w, r, "/console/keys/issued?customer="+url.QueryEscape(id), http.StatusSeeOther)
}

// issuedPage shows the key the session just issued, its secret this once;
// a view after that says it was shown. A HEAD is answered as the GET
// would be, and leaves the secret for it.
func (c *Console) issuedPage(w http.ResponseWriter, r *http.Request) {
	head := r.Method == http.MethodHead // answered unseen: it must not use up the secret's one view
	k := c.sess.popIssued(sessionOf(r), head)
	// A reload goes back to the keys of the customer the key was issued
	// to (the page's ?customer=; it went to the customers page, a review).
	back := "/console/customers"
	if cust := r.URL.Query().Get("customer"); cust != "" {
		back = keysLink(cust, "")
	}
	if k == nil && head { // where the GET goes, without the message it leaves
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	if k == nil {
		c.done(w, r, back, "", errors.New("that key's secret was shown once, on the page after it was issued, "+
			"and is not kept: issue a new key (and revoke the old one) if it was not copied"))
		return
	}
	if head {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		return
	}
	c.pages.render(w, c.log, http.StatusOK, "issued", c.view(r, "keys", "Key issued", *k))
}

// revokeData is the page that asks before a key is revoked.
type revokeData struct {
	Key                    ledger.Key
	Customer, Cursor, Back string // the keys page the form came from
}

// revokeKey revokes a key once confirmed: the keys page's Revoke button
// asks first (a page with the key's name and a second button), since a
// revocation cannot be undone and a click beside the limits form did it
// at once (a review).
func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if r.PostFormValue("confirm") != "yes" {
		k, err := c.client(r).Key(r.Context(), id)
		if err != nil {
			c.done(w, r, keysBack(r), "", err)
			return
		}
		if k.RevokedAt != nil {
			c.done(w, r, keysBack(r), "Key "+k.Prefix+"… was already revoked.", nil)
			return
		}
		d := revokeData{Key: k, Customer: r.PostFormValue("customer"), Cursor: r.PostFormValue("cursor"), Back: keysBack(r)}
		c.pages.render(w, c.log, http.StatusOK, "revoke", c.view(r, "keys", "Revoke "+k.Name+"?", d))
		return
	}
	k, err := c.client(r).RevokeKey(r.Context(), id)
	if ledger.ErrorCode(err) == ledger.EConflict {
		// Confirmed twice (a double click): the second answer, the one
		// shown, said "already revoked" as an error.
		if k, kerr := c.client(r).Key(r.Context(), id); kerr == nil && k.RevokedAt != nil {
			c.done(w, r, keysBack(r), "Key "+k.Prefix+"… was revoked at "+optionalTime(k.RevokedAt)+" UTC.", nil)
			return
		}
	}
	c.done(w, r, keysBack(r), "Key "+k.Prefix+"… revoked.", err)
}

// maxCounts are the largest values the ledger takes for the count fields
// (ledger's checkCounts): requests and tokens per minute up to 2^40,
// requests at once up to 2^31-1.
var maxCounts = map[string]int64{"rpm_limit": 1 << 40, "tpm_limit": 1 << 40, "max_concurrent": math.MaxInt32}

// optionalInt reads a positive integer field ("" is none), of at most its
// maxCounts when it has one; a larger one is refused as too large.
func optionalInt(r *http.Request, field string) (*int64, error) {
	s := strings.TrimSpace(r.PostFormValue(field))
	if s == "" {
		return nil, nil
	}
	most, ok := maxCounts[field]
	if !ok {
		most = math.MaxInt64
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s, "-") || err == nil && n > most {
		return nil, &ledger.Error{Code: ledger.EInvalid, Message: field + ": " + strconv.Quote(s) + " is too large: the most is " + formatInt(most)}
	}
	if err != nil || n < 1 {
		return nil, &ledger.Error{Code: ledger.EInvalid, Message: field + ": " + strconv.Quote(s) + " is not a whole number above 0"}
	}
	return &n, nil
}

// optionalAmount reads a spend limit field, an amount in the customer's
// currency ("" is none); the admin API checks it (a decimal above 0, to
// the micro-unit) and names the field when it is not.
func optionalAmount(r *http.Request, field string) *string {
	s := strings.TrimSpace(r.PostFormValue(field))
	if s == "" {
		return nil
	}
	return &s
}

// optionalDate reads a date (YYYY-MM-DD, UTC midnight) or date-time
// field (UTC, to the minute or the second, or RFC 3339; "" is none).
func optionalDate(r *http.Request, field string) (*time.Time, error) {
	s := strings.TrimSpace(r.PostFormValue(field))
	if s == "" {
		return nil, nil
	}
	if t, ok := parseDate(s); ok {
		return &t, nil
	}
	return nil, &ledger.Error{Code: ledger.EInvalid, Message: field + ": " + strconv.Quote(s) + " is not a date (2026-01-31 or 2026-01-31T18:00, UTC)"}
}

// parseDate reads a date (YYYY-MM-DD, UTC midnight) or date-time (UTC,
// to the minute or the second, or RFC 3339), as UTC.
func parseDate(s string) (time.Time, bool) {
	for _, layout := range []string{time.DateOnly, "2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// modelList splits a comma- or space-separated list of models (nil: none).
func modelList(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
	if len(f) == 0 {
		return nil
	}
	return f
}
