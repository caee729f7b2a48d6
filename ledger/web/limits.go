package web

// The key limits form: which fields the operator changed, and a save that
// sets only those (setLimits).

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// keyLimit is a field of a key's limits form.
type keyLimit struct {
	name  string // as sent, and as the API names it
	label string // as a notice says it, lower case
	none  string // what an empty value means, as a notice says it
	// shown is the field's value of a key as the form shows it ("": none).
	shown func(ledger.Key) string
	// canon is a value as typed or shown, written so that two values
	// meaning the same are equal ("10.50" and "10.5"); one it cannot read
	// is left as it is, for the API to refuse.
	canon func(string) string
	// say is a canonical value as a notice says it ("" is none).
	say func(string) string
}

// keyLimits are the fields of a key's limits form, in the form's order.
// Each field shown is sent back with the value the page showed
// (name_shown), so that a save sets only the fields the operator changed.
var keyLimits = []keyLimit{
	{"rpm_limit", "requests per minute", "none", func(k ledger.Key) string { return countText(k.RPMLimit) }, canonCount, sayAsIs},
	{"tpm_limit", "tokens per minute", "none", func(k ledger.Key) string { return countText(k.TPMLimit) }, canonCount, sayAsIs},
	{"max_concurrent", "requests at once", "none", func(k ledger.Key) string { return countText(k.MaxConcurrent) }, canonCount, sayAsIs},
	{"daily_limit", "daily spend limit", "none", func(k ledger.Key) string { return deref(k.DailyLimit) }, canonAmount, sayAsIs},
	{"monthly_limit", "monthly spend limit", "none", func(k ledger.Key) string { return deref(k.MonthlyLimit) }, canonAmount, sayAsIs},
	{"expires_at", "expiry", "never", func(k ledger.Key) string { return expiryText(k.ExpiresAt) }, canonExpiry, sayExpiry},
	{"allowed_models", "allowed models", "every model", func(k ledger.Key) string { return strings.Join(k.AllowedModels, ", ") },
		func(s string) string { return strings.Join(modelList(s), ", ") }, sayAsIs},
}

// keyLimitsShown is the value of each of a key's limits form fields, by
// name, as the form shows them.
func keyLimitsShown(k ledger.Key) map[string]string {
	m := make(map[string]string, len(keyLimits))
	for _, f := range keyLimits {
		m[f.name] = f.shown(k)
	}
	return m
}

// keyLimitNames are the names of a key's limits form fields.
func keyLimitNames() []string {
	names := make([]string, len(keyLimits))
	for i, f := range keyLimits {
		names[i] = f.name
	}
	return names
}

// sayValue is value (canonical) as a notice says it.
func (f keyLimit) sayValue(value string) string {
	if value == "" {
		return f.none
	}
	return f.say(value)
}

func countText(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

// expiryText is an expiry as the limits form shows it: UTC, to the
// second ("": none).
func expiryText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05")
}

func canonCount(s string) string {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return s
}

func canonAmount(s string) string {
	s = strings.TrimSpace(s)
	if !plainAmount.MatchString(s) || strings.Trim(s, ".") == "" {
		return s
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s = strings.TrimLeft(s, "0"); s == "" || s[0] == '.' {
		s = "0" + s
	}
	return s
}

func canonExpiry(s string) string {
	s = strings.TrimSpace(s)
	if t, ok := parseDate(s); ok {
		return expiryText(&t)
	}
	return s
}

func sayAsIs(s string) string { return s }

func sayExpiry(s string) string {
	if t, ok := parseDate(s); ok {
		return t.Format("2006-01-02 15:04:05") + " UTC"
	}
	return s
}

// limitChange is a field of the limits form the operator changed: the
// value the page showed, the one stored when it was sent, the one sent
// (each canonical).
type limitChange struct {
	f                   keyLimit
	shown, stored, sent string
}

// setLimits sets the limits of the form the operator changed: each
// field whose value differs from the one the page showed (its
// name_shown; a field sent without it is taken as changed), an empty
// one removing the limit. A field left as shown is not sent, so that a
// save that changes the requests per minute does not set the spend
// limits (which waits for the meter's batches: see the ledger's key
// spend lock), nor puts back a value changed elsewhere since the page was
// shown (a lost update). A field changed both here and elsewhere since
// is refused, the page saying both values and showing the form again
// with what was typed and the other fields as now stored: sent again, it
// is saved. The key is read, and the fields the operator changed are
// checked against it, then written on the condition that they still hold
// what was read (ledger.KeyPatch.If, checked in the statement that
// writes): a save made between the read and the write (another operator's
// at the same instant) fails it, and the form is checked again against
// the key as it is then, so that of two saves of one field at once one is
// saved and the other refused as for a value changed since shown.
func (c *Console) setLimits(w http.ResponseWriter, r *http.Request) {
	back, id := keysBack(r), chi.URLParam(r, "id")
	cl := c.client(r)
	_ = r.ParseForm()
	var lastErr error
	for range setLimitsTries {
		k, err := cl.Key(r.Context(), id)
		if err == nil && lastErr != nil && k.RevokedAt != nil {
			err = lastErr // revoked meanwhile: the patch's refusal says so
		}
		if err != nil {
			c.refuse(w, r, back, "limits-"+id, limitsForm(id), err)
			return
		}
		p, changes, conflicts, err := limitsPatch(r, k)
		if err != nil {
			c.refuse(w, r, back, "limits-"+id, limitsForm(id), err)
			return
		}
		if len(conflicts) > 0 {
			c.refuseStaleLimits(w, r, back, k, conflicts)
			return
		}
		if len(changes) == 0 {
			c.done(w, r, back, "Nothing to save: the limits of key "+k.Prefix+"… are as shown.", nil)
			return
		}
		k2, err := cl.UpdateKey(r.Context(), id, p)
		if ledger.ErrorCode(err) == ledger.EConflict {
			lastErr = err // changed since read (or revoked): read it again
			continue
		}
		if err != nil {
			// Refused or failed (a spend limit behind the meter's batches:
			// try again), the form comes back as it was sent.
			c.refuse(w, r, back, "limits-"+id, limitsForm(id), err)
			return
		}
		c.limitsSaved(w, r, back, changes, k2, p)
		return
	}
	// Changed again between each read and its write: the form comes back
	// as it was sent, to send again.
	c.refuse(w, r, back, "limits-"+id, limitsForm(id), lastErr)
}

// setLimitsTries is how many times setLimits reads a key and writes it
// when it was changed in between.
const setLimitsTries = 3

// limitsPatch checks the limits form of r against key k as stored: the
// patch of the fields the operator changed, conditional on each of them
// (and each typed as already stored) still holding k's value; those
// changes; and the fields changed elsewhere since the page was shown
// (conflicts), or why a value cannot be read (EInvalid).
func limitsPatch(r *http.Request, k ledger.Key) (p ledger.KeyPatch, changes, conflicts []limitChange, err error) {
	cond := &ledger.KeyCondition{}
	for _, f := range keyLimits {
		ch := limitChange{f: f, stored: f.canon(f.shown(k)), sent: f.canon(r.PostFormValue(f.name))}
		shown, ok := r.PostForm[f.name+"_shown"]
		if ch.shown = ch.stored; ok {
			ch.shown = f.canon(shown[0])
		}
		if ch.sent == ch.shown { // left as the page showed it
			continue
		}
		f.requireIn(cond, k) // decided from its stored value: it must hold it when written
		switch {
		case ch.sent == ch.stored: // already so
			continue
		case ch.shown != ch.stored: // changed elsewhere since the page was shown
			conflicts = append(conflicts, ch)
			continue
		}
		if err := f.setIn(&p, r); err != nil {
			return p, nil, nil, err
		}
		changes = append(changes, ch)
	}
	p.If = cond
	return p, changes, conflicts, nil
}

// limitsSaved says what a save of the limits form changed (k2: the key
// as saved, p: the patch).
func (c *Console) limitsSaved(w http.ResponseWriter, r *http.Request, back string, changes []limitChange, k2 ledger.Key, p ledger.KeyPatch) {
	said := make([]string, len(changes))
	for i, ch := range changes {
		said[i] = ch.f.label + " " + ch.f.sayValue(ch.stored) + " → " + ch.f.sayValue(ch.f.canon(ch.f.shown(k2)))
	}
	notice := "Limits of key " + k2.Prefix + "… saved: " + strings.Join(said, ", ") + "."
	if p.ExpiresAt.Set && k2.ExpiresAt != nil && !k2.ExpiresAt.After(c.now()) {
		// Not refused: a past expiry suspends a key that a later one
		// lets back in (revoking cannot be undone). But "saved" alone hid
		// that the key now refuses every request (a review).
		notice += " Its expiry, " + optionalTime(k2.ExpiresAt) +
			" UTC, has passed: the key is refused from now on, until a later expiry is set."
	}
	c.done(w, r, back, notice, nil)
}

// requireIn sets, in cond, the field's value in k as the one it must hold.
func (f keyLimit) requireIn(cond *ledger.KeyCondition, k ledger.Key) {
	switch f.name {
	case "rpm_limit":
		cond.RPMLimit = ledger.Optional[int64]{Set: true, Value: k.RPMLimit}
	case "tpm_limit":
		cond.TPMLimit = ledger.Optional[int64]{Set: true, Value: k.TPMLimit}
	case "max_concurrent":
		cond.MaxConcurrent = ledger.Optional[int64]{Set: true, Value: k.MaxConcurrent}
	case "daily_limit":
		cond.DailyLimit = ledger.Optional[string]{Set: true, Value: k.DailyLimit}
	case "monthly_limit":
		cond.MonthlyLimit = ledger.Optional[string]{Set: true, Value: k.MonthlyLimit}
	case "expires_at":
		cond.ExpiresAt = ledger.Optional[time.Time]{Set: true, Value: k.ExpiresAt}
	case "allowed_models":
		models := k.AllowedModels
		cond.AllowedModels = ledger.Optional[[]string]{Set: true, Value: &models}
	}
}

// setIn sets the field in p to its value in r's form, or returns why it
// cannot (EInvalid).
func (f keyLimit) setIn(p *ledger.KeyPatch, r *http.Request) error {
	var err error
	count := func(o *ledger.Optional[int64]) {
		var v *int64
		v, err = optionalInt(r, f.name)
		*o = ledger.Optional[int64]{Set: true, Value: v}
	}
	switch f.name {
	case "rpm_limit":
		count(&p.RPMLimit)
	case "tpm_limit":
		count(&p.TPMLimit)
	case "max_concurrent":
		count(&p.MaxConcurrent)
	case "daily_limit":
		p.DailyLimit = ledger.Optional[string]{Set: true, Value: optionalAmount(r, f.name)}
	case "monthly_limit":
		p.MonthlyLimit = ledger.Optional[string]{Set: true, Value: optionalAmount(r, f.name)}
	case "expires_at":
		var exp *time.Time
		exp, err = optionalDate(r, f.name)
		p.ExpiresAt = ledger.Optional[time.Time]{Set: true, Value: exp}
	case "allowed_models":
		p.AllowedModels = ledger.Optional[[]string]{Set: true}
		if models := modelList(r.PostFormValue(f.name)); models != nil {
			p.AllowedModels.Value = &models
		}
	}
	return err
}

// refuseStaleLimits refuses a limits form some of whose changes were
// also made elsewhere, to other values, since its page was shown
// (conflicts): nothing is saved. The form comes back with what was typed
// in the fields the operator changed and the values now stored in the
// others, and with those stored values as the ones shown, so that sent
// again it saves the operator's values.
func (c *Console) refuseStaleLimits(w http.ResponseWriter, r *http.Request, back string, k ledger.Key, conflicts []limitChange) {
	for _, f := range keyLimits {
		shown, ok := r.PostForm[f.name+"_shown"]
		if ok && f.canon(r.PostFormValue(f.name)) == f.canon(shown[0]) {
			r.PostForm.Set(f.name, f.shown(k))
		}
		r.PostForm.Set(f.name+"_shown", f.shown(k))
	}
	said := make([]string, len(conflicts))
	for i, ch := range conflicts {
		label := ch.f.label
		if i == 0 {
			label = strings.ToUpper(label[:1]) + label[1:]
		}
		said[i] = label + " was changed to " + ch.f.sayValue(ch.stored) + " since this page was shown (it showed " +
			ch.f.sayValue(ch.shown) + "); you entered " + ch.f.sayValue(ch.sent)
	}
	err := &ledger.Error{Code: ledger.EConflict, Message: strings.Join(said, "; ") + ". Nothing was saved: the form " +
		"shows what you entered and the other limits as they are now; save again to set yours."}
	fields := limitsForm(k.ID)
	f := refused("limits-"+k.ID, fields, r.PostForm, err)
	for i := range fields {
		if fields[i].Name == conflicts[0].f.name {
			f.field = &fields[i]
		}
	}
	ss := sessionOf(r)
	c.sess.setRefused(ss, f)
	c.sess.setFlash(ss, "", f.err)
	http.Redirect(w, r, back, http.StatusSeeOther)
}
