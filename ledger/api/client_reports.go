package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Usage returns one page of usage per group, from the hourly rollups (or
// the events, by end user) (q.Limit 0: the server's default, 100). Returns EInvalid for an unknown
// grouping, a customer or key id that is not a UUID, from not before to, a
// limit out of 1 to 1000 or a cursor the API did not return.
func (c *Client) Usage(ctx context.Context, q ledger.UsageQuery) (ledger.UsagePage, error) {
	limit := ""
	if q.Limit != 0 {
		limit = strconv.Itoa(q.Limit)
	}
	path := "/admin/v1/usage" + query("customer_id", q.CustomerID, "key_id", q.KeyID, "model", q.Model,
		"end_user", q.EndUser, "from", timeParam(q.From), "to", timeParam(q.To), "group_by", q.GroupBy, "limit", limit, "cursor", q.Cursor)
	return call[ledger.UsagePage](ctx, c, "GET", path, nil)
}

// UsageAll is Usage following the pages' cursors from q.Cursor to the
// last page: every group's row. It returns Usage's errors.
func (c *Client) UsageAll(ctx context.Context, q ledger.UsageQuery) ([]ledger.UsageRow, error) {
	return allPages(q.Cursor, func(cursor string) ([]ledger.UsageRow, string, error) {
		q.Cursor = cursor
		page, err := c.Usage(ctx, q)
		return page.Data, page.NextCursor, err
	})
}

// Rerate re-rates the events in [from, to) with the price book as it is
// now, as entries, and counts what it did. progress, when not nil, is
// called with the server's progress lines as they come (about once a
// second; RerateLine). Returns EInvalid for a zero bound or from not
// before to; a re-rating stopped short (EConflict: an event the price book
// cannot rate) returns what its committed batches did with the error. One
// stopped by a failure (the database, the server, ctx) says what its
// committed batches did, as far as the client knows, and to run it again.
func (c *Client) Rerate(ctx context.Context, from, to time.Time, progress func(ledger.RerateProgress)) (ledger.RerateResult, error) {
	in := map[string]string{"from": timeParam(from), "to": timeParam(to)}
	resp, err := c.openAccepting(ctx, "POST", "/admin/v1/rerate", in, ndjson)
	if err != nil {
		return ledger.RerateResult{}, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != ndjson { // a server that answers in one piece
		var res ledger.RerateResult
		err := json.NewDecoder(resp.Body).Decode(&res)
		if err != nil {
			err = fmt.Errorf("POST /admin/v1/rerate: decode the answer: %w", err)
		}
		return res, err
	}
	dec := json.NewDecoder(resp.Body)
	var last ledger.RerateProgress // the last progress line
	for {
		var l RerateLine
		if err := dec.Decode(&l); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			} else {
				err = fmt.Errorf("POST /admin/v1/rerate: the answer ended before its result (the server stopped?): %w", err)
			}
			return last.RerateResult, fmt.Errorf("%w; %s", err, rerateKept(last.RerateResult, last.Through))
		}
		switch {
		case l.Result != nil && l.Error != nil:
			e := &ledger.Error{Code: l.Error.Code, Message: l.Error.Message}
			if e.Code != ledger.EConflict && e.Code != ledger.EInvalid { // stopped by a failure, not by the range
				e.Message = strings.TrimRight(e.Message, ".") + "; " + rerateKept(*l.Result, time.Time{})
			}
			return *l.Result, e
		case l.Result != nil:
			return *l.Result, nil
		case l.Progress != nil:
			last = *l.Progress
			if progress != nil {
				progress(*l.Progress)
			}
		}
	}
}

// rerateKept tells the operator of a re-rating stopped short (its client
// stopped, the server or its database session lost) what is kept: the
// batches committed before it stopped, res (and, when known, every event
// before through) as last reported, and that the same re-rating run
// again finishes the range.
func rerateKept(res ledger.RerateResult, through time.Time) string {
	done := fmt.Sprintf("%d events examined, %d adjusted", res.Examined, res.Adjusted)
	if !through.IsZero() {
		done = "every event before " + through.UTC().Format(time.RFC3339Nano) + ", " + done + ", at the last progress line"
	}
	return "the batches re-rated before it stopped are kept (" + done + "): run the same re-rating again to finish the range"
}

// Reconcile checks that the ledger adds up over [from, to); a ledger that
// does not is a Reconciliation with Clean false, not an error. Returns
// EInvalid for a zero bound or from not before to.
func (c *Client) Reconcile(ctx context.Context, from, to time.Time) (ledger.Reconciliation, error) {
	path := "/admin/v1/reconciliation" + query("from", timeParam(from), "to", timeParam(to))
	return call[ledger.Reconciliation](ctx, c, "GET", path, nil)
}

// Statement returns a customer's statement for a UTC month (period
// "2026-01"). Returns ENotFound if the customer does not exist, EInvalid
// for a customer id that is not a UUID or a malformed period.
func (c *Client) Statement(ctx context.Context, customerID, period string) (ledger.Statement, error) {
	return call[ledger.Statement](ctx, c, "GET", statementPath(customerID, period, ""), nil)
}

// WriteStatement streams a customer's statement for a UTC month into w as
// the API sends it, in format "json" or "csv", and returns how many bytes
// it wrote. It returns Statement's errors, and EInvalid for another
// format; a stream cut short is an error, and w then holds part of it.
func (c *Client) WriteStatement(ctx context.Context, customerID, period, format string, w io.Writer) (int64, error) {
	return c.download(ctx, statementPath(customerID, period, format), w)
}

func statementPath(customerID, period, format string) string {
	return "/admin/v1/customers/" + seg(customerID) + "/statements/" + seg(period) + query("format", format)
}

// Export streams every ledger line in [from, to) into w as CSV, with a
// header (ledger.ExportColumns), and returns how many bytes it wrote.
// Returns EInvalid for a zero bound or from not before to. A stream cut
// short (the server aborts one that fails midway) is an error, and w then
// holds part of it: never take it for a complete export.
func (c *Client) Export(ctx context.Context, from, to time.Time, w io.Writer) (int64, error) {
	return c.download(ctx, "/admin/v1/export"+query("from", timeParam(from), "to", timeParam(to)), w)
}

// DeadLetters returns up to limit (1 to 10000) usage events the meter
// worker set aside, oldest first, with why: the first page only
// (DeadLettersPage for the next ones, AllDeadLetters for all). Returns
// EInvalid for a limit out of range, EUnavailable when the server has no
// NATS connection.
func (c *Client) DeadLetters(ctx context.Context, limit int) ([]usage.DeadLetter, error) {
	page, err := call[DeadLetterPage](ctx, c, "GET", "/admin/v1/dlq"+query("limit", strconv.Itoa(limit)), nil)
	return page.Data, err
}

// DeadLettersPage returns one page of the dead letters, oldest first: the
// first limit (1 to MaxDeadLetterLimit; 0: the server's default,
// DefaultDeadLetterLimit) after cursor ("": the first page). Its
// NextCursor, "" on the last page, asks for the next. Returns EInvalid for
// a limit out of range or a cursor that is not a sequence, EUnavailable
// when the server has no NATS connection.
func (c *Client) DeadLettersPage(ctx context.Context, limit int, cursor string) (DeadLetterPage, error) {
	l := ""
	if limit != 0 {
		l = strconv.Itoa(limit)
	}
	return call[DeadLetterPage](ctx, c, "GET", "/admin/v1/dlq"+query("limit", l, "cursor", cursor), nil)
}

// AllDeadLetters returns every dead letter after cursor ("": from the
// oldest), oldest first, asking for them limit (0: the server's default)
// a page at a time (DeadLettersPage) and following the cursors. It
// returns DeadLettersPage's errors.
func (c *Client) AllDeadLetters(ctx context.Context, limit int, cursor string) ([]usage.DeadLetter, error) {
	return allPages(cursor, func(cursor string) ([]usage.DeadLetter, string, error) {
		page, err := c.DeadLettersPage(ctx, limit, cursor)
		return page.Data, page.NextCursor, err
	})
}

// ReplayDeadLetters sends the dead letters with the given sequences (every
// one when seqs is empty) back to the usage stream, and returns how many
// dead letters (a group set aside whole counts one; it goes back as its
// events). Returns ENotFound for a sequence the dead-letter stream does
// not hold, EConflict for a letter that cannot be replayed (a group cut to
// 512 KiB, or of more than 16 events), none being replayed then;
// EUnavailable when the server has no NATS connection.
func (c *Client) ReplayDeadLetters(ctx context.Context, seqs []uint64) (int, error) {
	in := struct {
		Seqs []uint64 `json:"seqs"`
	}{Seqs: append([]uint64{}, seqs...)}
	out, err := call[struct {
		Replayed int `json:"replayed"`
	}](ctx, c, "POST", "/admin/v1/dlq/replay", in)
	return out.Replayed, err
}

// ReplayDeadLettersProgress is ReplayDeadLetters, calling progress (when
// not nil) with the dead letters replayed so far and how many in all, as
// the admin API reports them (application/x-ndjson, DLQReplayLine): once
// they are checked, then at most once a second. An admin API that answers
// in one piece is read as ReplayDeadLetters reads it.
func (c *Client) ReplayDeadLettersProgress(ctx context.Context, seqs []uint64, progress func(done, total int)) (int, error) {
	in := struct {
		Seqs []uint64 `json:"seqs"`
	}{Seqs: append([]uint64{}, seqs...)}
	resp, err := c.openAccepting(ctx, "POST", "/admin/v1/dlq/replay", in, ndjson)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != ndjson {
		var res DLQReplayResult
		if err := dec.Decode(&res); err != nil {
			return 0, fmt.Errorf("POST /admin/v1/dlq/replay: decode the answer: %w", err)
		}
		return res.Replayed, nil
	}
	for {
		var l DLQReplayLine
		if err := dec.Decode(&l); err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, fmt.Errorf("POST /admin/v1/dlq/replay: the answer ended before its result (the server stopped?): %w", err)
		}
		switch {
		case l.Result != nil && l.Error != nil:
			return l.Result.Replayed, &ledger.Error{Code: l.Error.Code, Message: l.Error.Message}
		case l.Result != nil:
			return l.Result.Replayed, nil
		case l.Progress != nil && progress != nil:
			progress(l.Progress.Replayed, l.Progress.Total)
		}
	}
}

// RemoveDeadLetters removes the dead letters with the given sequences (at
// least one) for good, without replaying them, and returns how many (POST
// /admin/v1/dlq/remove). A sequence the stream does not hold is
// ledger.ENotFound, and then none is removed; no sequences is
// ledger.EInvalid.
func (c *Client) RemoveDeadLetters(ctx context.Context, seqs []uint64) (int, error) {
	in := struct {
		Seqs []uint64 `json:"seqs"`
	}{Seqs: append([]uint64{}, seqs...)}
	out, err := call[struct {
		Removed int `json:"removed"`
	}](ctx, c, "POST", "/admin/v1/dlq/remove", in)
	return out.Removed, err
}
