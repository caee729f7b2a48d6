package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

type pricesData struct {
	Current, Scheduled, Past []priceRow
	// From is the add form's default start: the next whole minute (UTC),
	// so that a version added as it stands is not back-dated over usage
	// already rated.
	From string
}

// priceRow is a price version as the page lists it, with a note for
// people ("resumes 2026-02-08 after version 6").
type priceRow struct {
	api.Price
	Note string
}

// pricesPage shows the price book: for each model the version in force
// now (as the ledger chooses it: a bounded one over the open-ended one,
// which resumes after it; of open-ended ones, the latest started), those
// scheduled to start later, and the past ones (ended, or superseded by a
// later open-ended version); and the form to add one.
func (c *Console) pricesPage(w http.ResponseWriter, r *http.Request) {
	ps, err := c.client(r).Prices(r.Context(), "")
	now := c.now().UTC()
	d := pricesData{From: now.Truncate(time.Minute).Add(time.Minute).Format("2006-01-02T15:04")}
	// For each model, the bounded version in force and the open-ended one
	// that applies or resumes: the latest started of each.
	bounded, open := map[string]int{}, map[string]int{}
	later := func(m map[string]int, i int) {
		if j, ok := m[ps[i].Model]; !ok || ps[i].EffectiveFrom.After(ps[j].EffectiveFrom) {
			m[ps[i].Model] = i
		}
	}
	for i, p := range ps {
		switch {
		case p.EffectiveFrom.After(now):
		case p.EffectiveTo == nil:
			later(open, i)
		case p.EffectiveTo.After(now):
			later(bounded, i)
		}
	}
	for i, p := range ps {
		row := priceRow{Price: p}
		b, hasB := bounded[p.Model]
		switch {
		case p.EffectiveFrom.After(now):
			d.Scheduled = append(d.Scheduled, row)
		case hasB && b == i:
			row.Note = "promotion"
			d.Current = append(d.Current, row)
		case open[p.Model] == i && p.EffectiveTo == nil && hasB:
			row.Note = fmt.Sprintf("resumes %s, after version %d", ps[b].EffectiveTo.UTC().Format("2006-01-02 15:04"), ps[b].ID)
			d.Current = append(d.Current, row)
		case open[p.Model] == i && p.EffectiveTo == nil:
			d.Current = append(d.Current, row)
		default:
			if p.EffectiveTo == nil {
				row.Note = "superseded"
			}
			d.Past = append(d.Past, row)
		}
	}
	v := c.view(r, "prices", "Price book", d)
	if err != nil {
		v.Error = errorText(err)
	}
	c.pages.render(w, c.log, http.StatusOK, "prices", v)
}

// addPrice adds a price version through the API.
func (c *Console) addPrice(w http.ResponseWriter, r *http.Request) {
	f := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	in := ledger.PriceInput{Model: f("model"), Currency: f("currency"), Input: f("input"), CachedInput: f("cached_input"),
		CacheWrite: f("cache_write"), Output: f("output"), Reasoning: f("reasoning"), RequestFee: f("request_fee"),
		WebSearch: f("web_search")}
	from, err := optionalDate(r, "effective_from")
	if err == nil && from == nil {
		err = &ledger.Error{Code: ledger.EInvalid, Message: "effective_from is required"}
	}
	var to *time.Time
	if err == nil {
		to, err = optionalDate(r, "effective_to")
	}
	if err != nil {
		c.refuse(w, r, "/console/prices", "price", priceForm, err)
		return
	}
	in.EffectiveFrom, in.EffectiveTo = *from, to
	// One version per form shown: sent twice (a double click, the
	// browser's resend), the second sending met the first's version as a
	// conflict, and the page the browser showed said so, the form filled
	// in again, as if nothing had been added.
	notice, resent, err := c.sess.doOnce(sessionOf(r), r.PostFormValue("form_id"), func() (string, error) {
		p, err := c.client(r).CreatePrice(r.Context(), in)
		if err != nil {
			return "", err
		}
		until := "open-ended"
		if p.EffectiveTo != nil {
			until = "until " + day(*p.EffectiveTo) + " UTC"
		}
		return "Price version " + strconv.FormatInt(p.ID, 10) + " for " + p.Model + " added: " + p.Currency +
			", from " + day(p.EffectiveFrom) + " UTC, " + until + ".", nil
	})
	if err != nil {
		c.refuse(w, r, "/console/prices", "price", priceForm, err)
		return
	}
	if resent {
		notice = "That form was sent twice and added one version. " + notice
	}
	c.done(w, r, "/console/prices", notice, nil)
}

// day is t as the console's pages show a time: UTC, to the minute.
func day(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }

type reconciliationData struct {
	From, To string // the range asked, as the form gave it
	Result   *ledger.Reconciliation
	// At is when the range was checked: zero when it was not (the range
	// asked is not one, or the check failed).
	At time.Time
	// Widened is whether the range checked (Result's From and To, whole
	// hours) is wider than the one asked.
	Widened   bool
	Default   bool // the last day's check (cached), not a range the operator chose
	Computing bool // the last day's check is running
}

// APIListed is how many unpriced models the admin API's reconciliation
// lists (ledger.MaxListed), for the page to say.
func (reconciliationData) APIListed() int64 { return ledger.MaxListed }

// UnpricedShown is what the page lists of the unpriced models of the
// range checked (mostFirst: those of the most events), counting every
// model the reconciliation counted (it lists at most ledger.MaxListed).
func (d reconciliationData) UnpricedShown() listed[ledger.UnpricedModel] {
	if d.Result == nil {
		return listed[ledger.UnpricedModel]{}
	}
	l := mostFirst(d.Result.Unpriced, func(u ledger.UnpricedModel) int64 { return u.Events })
	if d.Result.UnpricedModels > int64(len(l.Rows)) {
		l.Of = d.Result.UnpricedModels
	}
	return l
}

// reconciliationPage shows the reconciliation of the last 24 hours
// (recomputed in the background like the overview), or, when the form
// names a range, checks that range now.
func (c *Console) reconciliationPage(w http.ResponseWriter, r *http.Request) {
	q, cl := r.URL.Query(), c.client(r)
	check := func(ctx context.Context, from, to string) (*reconciliationData, error) {
		d := &reconciliationData{From: from, To: to}
		f, err := parseFormTime("from", from)
		if err != nil {
			return d, err
		}
		t, err := parseFormTime("to", to)
		if err != nil {
			return d, err
		}
		rec, err := cl.Reconcile(ctx, f, t)
		if err == nil {
			d.Result, d.At = &rec, time.Now()
			d.Widened = !rec.From.Equal(f) || !rec.To.Equal(t)
		}
		return d, err
	}
	var d *reconciliationData
	var err error
	if q.Get("from") != "" || q.Get("to") != "" {
		d, err = check(r.Context(), q.Get("from"), q.Get("to"))
	} else {
		d, err = c.recon.get(r.Context(), "", q.Get("fresh") != "", true, func(ctx context.Context) (*reconciliationData, error) {
			now := time.Now().UTC()
			d, err := check(ctx, now.Add(-24*time.Hour).Truncate(time.Hour).Format("2006-01-02T15:04"),
				now.Add(time.Hour).Truncate(time.Hour).Format("2006-01-02T15:04"))
			if d != nil {
				d.Default = true
			}
			return d, err
		})
	}
	v := c.view(r, "reconciliation", "Reconciliation", d)
	if d == nil && err == nil {
		v.Refresh, v.Notice = 2, "Checking the last day (every event in it); this page reloads itself until the check is done."
		v.Data = &reconciliationData{Computing: true}
	} else if d == nil {
		v.Data = &reconciliationData{}
	}
	if err != nil {
		v.Error = errorText(err)
	}
	c.pages.render(w, c.log, queryStatus(err, http.StatusOK), "reconciliation", v)
}

func parseFormTime(field, s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04", time.DateOnly, time.RFC3339} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, &ledger.Error{Code: ledger.EInvalid, Message: field + ": " + strconv.Quote(s) + " is not a time (2026-01-31T00:00, UTC)"}
}

type dlqData struct {
	Letters []usage.DeadLetter
	Limit   int
	// Cursor is the page's ?cursor= (the API's next_cursor; "": the first
	// page), which its forms send back to return to it. First and Next are
	// the links to the first page (on a later page) and to the next page,
	// "" when there is none.
	Cursor, First, Next string
}

// dlqLimit is how many dead letters a page lists.
const dlqLimit = 200

// dlqPage lists one page of dlqLimit dead letters, oldest first, after
// ?cursor= (the API's next_cursor), with links to the first and the next
// page: it listed the oldest dlqLimit and nothing past them.
func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request) {
	d := dlqData{Limit: dlqLimit, Cursor: r.URL.Query().Get("cursor")}
	if d.Cursor != "" {
		d.First = dlqLink("")
	}
	page, err := c.client(r).DeadLettersPage(r.Context(), dlqLimit, d.Cursor)
	d.Letters = page.Data
	if page.NextCursor != "" {
		d.Next = dlqLink(page.NextCursor)
	}
	v := c.view(r, "dlq", "Dead letters", d)
	if err != nil {
		v.Error = errorText(err)
	}
	c.pages.render(w, c.log, queryStatus(err, http.StatusOK), "dlq", v)
}

// dlqLink is the dead-letter page after cursor (the API's next_cursor;
// "": the first page).
func dlqLink(cursor string) string {
	if cursor == "" {
		return "/console/dlq"
	}
	return "/console/dlq?" + url.Values{"cursor": {cursor}}.Encode()
}

// dlqBack is the dead-letter page a form (replay, remove) returns to:
// the page it was sent from (its cursor field).
func dlqBack(r *http.Request) string { return dlqLink(r.PostFormValue("cursor")) }

// replay sends one dead letter (seq) or all of them back to the usage
// stream through the API.
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	var seqs []uint64
	if s := r.PostFormValue("seq"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			c.done(w, r, dlqBack(r), "", &ledger.Error{Code: ledger.EInvalid, Message: "seq: " + strconv.Quote(s) + " is not a sequence number"})
			return
		}
		seqs = []uint64{n}
	}
	n, err := c.client(r).ReplayDeadLetters(r.Context(), seqs)
	notice := strconv.Itoa(n) + " dead letters replayed."
	if n == 1 {
		notice = "1 dead letter replayed."
	}
	c.done(w, r, dlqBack(r), notice, err)
}

// dlqRemoveData is the page that asks before a dead letter is removed:
// its sequence, and the letter when the list still shows it.
type dlqRemoveData struct {
	Seq    uint64
	Letter *usage.DeadLetter
	// Cursor is the dead-letter page the Remove button was on, and Back
	// its link, where the confirmation and Cancel return.
	Cursor, Back string
}

// removeDeadLetter removes one dead letter (seq) for good once confirmed:
// the row's Remove button asks first (a page with the letter and a second
// button), as its usage is then never billed and a click beside Replay
// would otherwise do it at once. The server logs what it removed.
func (c *Console) removeDeadLetter(w http.ResponseWriter, r *http.Request) {
	s := r.PostFormValue("seq")
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil || seq == 0 {
		c.done(w, r, dlqBack(r), "", &ledger.Error{Code: ledger.EInvalid, Message: "seq: " + strconv.Quote(s) + " is not a sequence number"})
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		// The letter itself, on whichever page it is (the one after seq-1;
		// for 1, the first): it was looked for on the first page only,
		// and one past it was "not found".
		after := ""
		if seq > 1 {
			after = strconv.FormatUint(seq-1, 10)
		}
		page, err := c.client(r).DeadLettersPage(r.Context(), 1, after)
		if err != nil {
			c.done(w, r, dlqBack(r), "", err)
			return
		}
		d := dlqRemoveData{Seq: seq, Cursor: r.PostFormValue("cursor"), Back: dlqBack(r)}
		if len(page.Data) == 1 && page.Data[0].Seq == seq {
			d.Letter = &page.Data[0]
		}
		if d.Letter == nil {
			c.done(w, r, dlqBack(r), "", &ledger.Error{Code: ledger.ENotFound, Message: "dead letter " + s + " not found: replayed or removed already"})
			return
		}
		c.pages.render(w, c.log, http.StatusOK, "dlqremove", c.view(r, "dlq", "Remove dead letter "+s+"?", d))
		return
	}
	n, err := c.client(r).RemoveDeadLetters(r.Context(), []uint64{seq})
	c.done(w, r, dlqBack(r), strconv.Itoa(n)+" dead letter removed (sequence "+s+").", err)
}
