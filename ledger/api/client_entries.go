package api

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// AddEntry records a credit (kind ledger.KindCredit) or an adjustment
// (ledger.KindAdjustment) for a customer and returns the entry; a retry
// with the same idempotency key returns the entry first made with it.
// Returns ENotFound if the customer does not exist, EInvalid for a bad
// amount, another kind or a customer id that is not a UUID, EConflict for
// an idempotency key used for another entry.
func (c *Client) AddEntry(ctx context.Context, customerID, kind string, in ledger.EntryInput) (ledger.Entry, error) {
	route := map[string]string{ledger.KindCredit: "credits", ledger.KindAdjustment: "adjustments"}[kind]
	if route == "" {
		return ledger.Entry{}, &ledger.Error{Code: ledger.EInvalid, Message: "kind: " + strconv.Quote(kind) + " is neither credit nor adjustment"}
	}
	return call[ledger.Entry](ctx, c, "POST", "/admin/v1/customers/"+seg(customerID)+"/"+route, in)
}

// Entries returns every entry that moves a customer's balance, effective
// in [from, to) (a zero time leaves that end open), oldest first, asking
// for them a page at a time (EntriesPage) and following the cursors.
// Returns ENotFound if the customer does not exist, EInvalid if its id is
// not a UUID or from is not before to.
func (c *Client) Entries(ctx context.Context, customerID string, from, to time.Time) ([]ledger.Entry, error) {
	var pages [][]ledger.Entry // latest first
	cursor := ""
	for {
		page, err := c.EntriesPage(ctx, customerID, from, to, 0, cursor)
		if err != nil {
			return nil, err
		}
		pages = append(pages, page.Data)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	slices.Reverse(pages)
	if es := slices.Concat(pages...); es != nil {
		return es, nil
	}
	return []ledger.Entry{}, nil
}

// EntriesPage returns one page of the entries that move a customer's
// balance, effective in [from, to) (a zero time leaves that end open): the
// latest limit (1 to ledger.MaxEntryLimit; 0: the server's default,
// ledger.DefaultEntryLimit) before cursor ("": the range's end), oldest
// first. Its NextCursor, "" on the last page, asks for the entries before
// them. Returns ENotFound if the customer does not exist, EInvalid if its
// id is not a UUID, from is not before to, limit is out of range or cursor
// is not one the server returned.
func (c *Client) EntriesPage(ctx context.Context, customerID string, from, to time.Time, limit int, cursor string) (ledger.EntryPage, error) {
	l := ""
	if limit != 0 {
		l = strconv.Itoa(limit)
	}
	path := "/admin/v1/customers/" + seg(customerID) + "/entries" + query("from", timeParam(from), "to", timeParam(to), "limit", l, "cursor", cursor)
	return call[ledger.EntryPage](ctx, c, "GET", path, nil)
}

// LatestEntries is Entries kept to the latest n (1 to 10000) of the
// range, still oldest first: only those are read and sent. Returns
// EInvalid too for an n out of range.
func (c *Client) LatestEntries(ctx context.Context, customerID string, from, to time.Time, n int) ([]ledger.Entry, error) {
	if n == 0 { // 0 would be the server's default page
		return nil, &ledger.Error{Code: ledger.EInvalid, Message: "n: 0 is not between 1 and 10000"}
	}
	page, err := c.EntriesPage(ctx, customerID, from, to, n, "")
	return page.Data, err
}

// Reverse reverses a credit or adjustment with a refund entry, once (a
// second reversal returns the first), and returns the refund. Returns
// ENotFound if the entry does not exist, EInvalid for an id below 1,
// EConflict for an entry that is itself a reversal.
func (c *Client) Reverse(ctx context.Context, entryID int64, memo string) (ledger.Entry, error) {
	path := "/admin/v1/entries/" + strconv.FormatInt(entryID, 10) + "/reverse"
	return call[ledger.Entry](ctx, c, "POST", path, map[string]string{"memo": memo})
}

// RefundEvent refunds what a usage event was charged, once: a second
// refund returns the first. Returns ENotFound if the event does not
// exist, EInvalid if id is not a UUID, EConflict for an event charged
// nothing or re-rated since its refund.
func (c *Client) RefundEvent(ctx context.Context, eventID, memo string) (ledger.Entry, error) {
	return call[ledger.Entry](ctx, c, "POST", "/admin/v1/events/"+seg(eventID)+"/refund", map[string]string{"memo": memo})
}

// Event returns a usage event (its id is the request's X-Request-Id) as
// rated. Returns ENotFound if it does not exist, EInvalid if id is not a
// UUID.
func (c *Client) Event(ctx context.Context, id string) (ledger.RatedEvent, error) {
	return call[ledger.RatedEvent](ctx, c, "GET", "/admin/v1/events/"+seg(id), nil)
}
