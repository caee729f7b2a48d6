package web

import (
	"html"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/ledger"
)

// formField is a field of a console form: its name (as sent, and as the
// API's errors name it), its label's words and its input's id.
type formField struct{ Name, Label, ID string }

// The console's forms that write, by their id: a refused one comes back
// filled in as it was sent (see Console.refuse).
var (
	issueForm = []formField{{"name", "Name", "name"}, {"rpm_limit", "Requests per minute", "rpm"},
		{"tpm_limit", "Tokens per minute", "tpm"}, {"max_concurrent", "Requests at once", "conc"},
		{"daily_limit", "Daily spend limit", "daily"}, {"monthly_limit", "Monthly spend limit", "monthly"},
		{"expires_at", "Expires", "exp"}, {"allowed_models", "Allowed models", "models"}}
	creditForm = []formField{{"amount", "Credit amount", "amount"}, {"memo", "Memo", "memo"}}
	priceForm  = []formField{{"model", "Model", "model"}, {"currency", "Currency", "currency"},
		{"input", "Input", "input"}, {"cached_input", "Cached input", "cached"}, {"cache_write", "Cache write", "cwrite"},
		{"output", "Output", "output"}, {"reasoning", "Reasoning", "reasoning"}, {"request_fee", "Request fee", "fee"},
		{"web_search", "Web search", "search"}, {"effective_from", "Effective from", "from"}, {"effective_to", "Effective to", "to"}}
)

// limitsForm is the limits form of key id: its inputs' ids end with the
// key's.
func limitsForm(id string) []formField {
	fields := slices.Clone(issueForm[1:]) // all but the name
	for i := range fields {
		fields[i].ID += "-" + id
	}
	return fields
}

// refusedForm is a form the console or the API refused, kept in the
// session for the page the refusal returns to: what was typed, and the
// field the error is about. The zero value is no form.
type refusedForm struct {
	// form is the form's id: "price", or "credit-", "issue-" and the
	// customer's id, or "limits-" and the key's (a form is shown filled
	// in only where it was sent from).
	form   string
	values url.Values // as sent, but the CSRF token
	field  *formField // the field the error names, nil for none
	err    string     // the error, in the labels' words
}

// Is reports whether form is the refused one.
func (f refusedForm) Is(form string) bool { return f.form != "" && f.form == form }

// Value is what was typed in field of form, when it is the refused one,
// else shown: the field's value on the page.
func (f refusedForm) Value(form, field, shown string) string {
	if f.form != form {
		return shown
	}
	return f.values.Get(field)
}

// Kept is field's value as sent in form, when it is the refused one and
// sent it, else shown. It is for hidden fields (what the page showed, as
// a key's limits form's name_shown), which a form sent by other means
// than the page (or by an older page) may lack.
func (f refusedForm) Kept(form, field, shown string) string {
	if v, ok := f.values[field]; f.form == form && ok && len(v) > 0 {
		return v[0]
	}
	return shown
}

// Invalid is the attributes of form's input field: when the error is
// about it, marked invalid, described by the error beside it, focused.
func (f refusedForm) Invalid(form, field string) template.HTMLAttr {
	if f.form != form || f.field == nil || f.field.Name != field {
		return ""
	}
	return template.HTMLAttr(`aria-invalid="true" aria-describedby="` + f.field.ID + `-error" autofocus`)
}

// Error is the error beside form's input field, when it is about it.
func (f refusedForm) Error(form, field string) template.HTML {
	if f.form != form || f.field == nil || f.field.Name != field {
		return ""
	}
	return template.HTML(`<p class="field-error" id="` + f.field.ID + `-error">` + html.EscapeString(f.err) + `</p>`)
}

// fieldName is a form field's name as an error says it: lower case and
// underscores, a word of its own.
var fieldName = regexp.MustCompile(`\b[a-z]+(_[a-z]+)*\b`)

// asTyped is a posted form's values as the operator typed them: a copy
// without the CSRF token, to keep for the form shown again.
func asTyped(values url.Values) url.Values {
	values = maps.Clone(values)
	values.Del("csrf")
	return values
}

// refused words err for the form fields: the field the error begins with
// (as "rpm_limit: …" or "name must …") becomes its label, as does every
// other field with an underscore in its name the message mentions.
func refused(form string, fields []formField, values url.Values, err error) refusedForm {
	f := refusedForm{form: form, values: asTyped(values), err: errorText(err)}
	if ledger.ErrorCode(err) != ledger.EInvalid {
		return f
	}
	for i, ff := range fields {
		if strings.HasPrefix(f.err, ff.Name+":") || strings.HasPrefix(f.err, ff.Name+" ") {
			f.field = &fields[i]
			f.err = ff.Label + strings.TrimPrefix(f.err, ff.Name)
			break
		}
	}
	f.err = fieldName.ReplaceAllStringFunc(f.err, func(w string) string {
		for _, ff := range fields {
			if ff.Name == w && strings.Contains(w, "_") {
				return ff.Label
			}
		}
		return w
	})
	return f
}

// refuse is done for a write that failed: it redirects to path, leaving
// in the session the error and the form as sent, for path's page to show
// filled in, the error beside the field it names.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, path, form string, fields []formField, err error) {
	ss := sessionOf(r)
	f := refused(form, fields, r.PostForm, err)
	c.sess.setRefused(ss, f)
	c.sess.setFlash(ss, "", f.err)
	http.Redirect(w, r, path, http.StatusSeeOther)
}
