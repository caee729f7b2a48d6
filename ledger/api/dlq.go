package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// DeadLetters is the usage pipeline's dead-letter stream, as the admin API
// needs it (meter.DLQ implements it).
type DeadLetters interface {
	// List returns up to limit dead letters, oldest first, from the
	// first one after sequence after (0: from the oldest).
	List(ctx context.Context, after uint64, limit int) ([]usage.DeadLetter, error)
	// Replay sends the dead letters with the given sequences (all when
	// empty) back to the usage stream and returns how many dead letters
	// (a group set aside whole counts one; it goes back as its events). A
	// sequence it does not hold is an error with a NotFound method
	// reporting true (meter.NoDeadLetterError), answered as not found; a
	// letter it cannot replay (a group cut to 512 KiB, or of more than 16
	// events), one with a Conflict method reporting true
	// (meter.UnreplayableError), answered as a conflict. Either way none
	// is replayed.
	Replay(ctx context.Context, seqs []uint64) (int, error)
	// Remove deletes the dead letters with the given sequences (at least
	// one) without sending them back, logging each at WARN, and returns
	// how many. A sequence it does not hold is an error with a NotFound
	// method reporting true, and then none is removed.
	Remove(ctx context.Context, seqs []uint64) (int, error)
}

// SetDeadLetters enables the dead-letter routes; until it is called they
// answer 503: this process has no NATS connection, or, after
// SetDeadLettersPending, its dead-letter stream is not made yet. It is
// safe to call while the API serves.
func (a *Admin) SetDeadLetters(d DeadLetters) { a.dlq.Store(&dlqState{d: d}) }

// SetDeadLettersPending makes the dead-letter routes answer 503 "the
// dead-letter stream is not reachable yet: <cause>; retrying", until
// SetDeadLetters: the process has NATS, but could not make the stream
// yet (NATS not reachable, or the stream refused), and tries again. It is
// safe to call while the API serves.
func (a *Admin) SetDeadLettersPending(cause error) {
	a.dlq.Store(&dlqState{pending: "the dead-letter stream is not reachable yet: " + cause.Error() + "; retrying"})
}

// dlqState is the dead letters the routes serve (SetDeadLetters) or,
// while they are not there yet, why (SetDeadLettersPending).
type dlqState struct {
	d       DeadLetters
	pending string
}

func (a *Admin) deadLetters(w http.ResponseWriter, r *http.Request) (DeadLetters, bool) {
	st := a.dlq.Load()
	switch {
	case st == nil:
		writeError(w, ledger.EUnavailable,
			"the dead-letter stream is not reachable from this process: run the admin API with TOLLGATE_NATS_URL set, or use tollgate serve")
		return nil, false
	case st.d == nil:
		writeError(w, ledger.EUnavailable, st.pending)
		return nil, false
	}
	return st.d, true
}

// DeadLetterPage is one page of dead letters, oldest first (GET
// /admin/v1/dlq). NextCursor, "" on the last page, is the cursor of the
// next: the sequence of this page's last letter, in decimal.
type DeadLetterPage struct {
	Data       []usage.DeadLetter `json:"data"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

// DefaultDeadLetterLimit and MaxDeadLetterLimit are the dead letters a
// page of GET /admin/v1/dlq holds when limit is not given, and at most.
const (
	DefaultDeadLetterLimit = 100
	MaxDeadLetterLimit     = 10000
)

// listDLQ serves GET /admin/v1/dlq?limit=N&cursor=C: one page of the dead
// letters, oldest first, the first limit (1 to MaxDeadLetterLimit;
// DefaultDeadLetterLimit when not given) after cursor (a page's
// next_cursor: the sequence it ended with), with the next_cursor of
// those after them. It gave the oldest limit letters and nothing past
// them: with more than 10,000 set aside, the rest could not be seen.
func (a *Admin) listDLQ(w http.ResponseWriter, r *http.Request) {
	d, ok := a.deadLetters(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := DefaultDeadLetterLimit
	if q.Get("limit") != "" {
		n, err := intParam("limit", q.Get("limit"), 1, MaxDeadLetterLimit)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		limit = n
	}
	after, err := dlqCursor(q.Get("cursor"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// One more than the page tells whether another follows.
	ls, err := d.List(r.Context(), after, limit+1)
	page := DeadLetterPage{Data: ls}
	if page.Data == nil {
		page.Data = []usage.DeadLetter{}
	}
	if len(ls) > limit {
		page.Data = ls[:limit]
		page.NextCursor = strconv.FormatUint(ls[limit-1].Seq, 10)
	}
	a.respond(w, r, http.StatusOK, page, err)
}

// dlqCursor is the sequence a cursor of GET /admin/v1/dlq (a page's
// next_cursor) names, 0 for none (the first page), or EInvalid for one
// that is not a sequence (a decimal integer from 1).
func dlqCursor(c string) (uint64, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(c, 10, 64)
	if err != nil || n == 0 || c[0] == '+' {
		return 0, &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf(
			"cursor: %q is not a dead letter's sequence (a page's next_cursor, a decimal integer from 1); leave it out for the first page", c)}
	}
	return n, nil
}

// replayDLQ serves POST /admin/v1/dlq/replay {"seqs": [..]} (empty: all).
func (a *Admin) replayDLQ(w http.ResponseWriter, r *http.Request) {
	d, ok := a.deadLetters(w, r)
	if !ok {
		return
	}
	var in struct {
		Seqs []uint64 `json:"seqs"`
	}
	if err := decodeOptional(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := checkSeqs(in.Seqs); err != nil {
		a.fail(w, r, err)
		return
	}
	pr, ok := d.(ReplayProgresser)
	if !ok || !accepts(r, ndjson) {
		n, err := d.Replay(r.Context(), in.Seqs)
		a.respond(w, r, http.StatusOK, map[string]int{"replayed": n}, dlqError(err))
		return
	}
	// The answer begins with the first progress, once every letter is
	// checked: what is refused before any letter is sent (an unknown
	// sequence, a letter that cannot be replayed) keeps its status.
	rc := http.NewResponseController(w)
	line := func(l DLQReplayLine) {
		b, _ := json.Marshal(l) // counts and strings: never fails
		_, _ = w.Write(append(b, '\n'))
		_ = rc.Flush()
	}
	started, last := false, time.Time{}
	n, err := pr.ReplayProgress(r.Context(), in.Seqs, func(done, total int) {
		if !started {
			started = true
			w.Header().Set("Content-Type", ndjson)
			w.WriteHeader(http.StatusOK)
		}
		if now := time.Now(); done == 0 || done == total || now.Sub(last) >= rerateProgressEvery {
			last = now
			line(DLQReplayLine{Progress: &DLQReplayProgress{Replayed: done, Total: total}})
		}
	})
	if !started {
		a.respond(w, r, http.StatusOK, map[string]int{"replayed": n}, dlqError(err))
		return
	}
	if err != nil && r.Context().Err() != nil {
		a.log.Info("dead-letter replay stopped: its client went away", "replayed", n)
		return
	}
	end := DLQReplayLine{Result: &DLQReplayResult{Replayed: n}}
	if err != nil {
		code, msg := a.errorAnswer(r, dlqError(err))
		end.Error = &ErrorBody{Code: code, Message: msg}
	}
	line(end)
}

// ReplayProgresser is a DeadLetters whose replay reports how far it is
// (meter.DLQ): ReplayProgress is Replay, calling progress with the dead
// letters replayed so far and how many it replays in all, once every one
// is checked and then after each.
type ReplayProgresser interface {
	ReplayProgress(ctx context.Context, seqs []uint64, progress func(done, total int)) (int, error)
}

// DLQReplayLine is one line of POST /admin/v1/dlq/replay's answer when
// the client accepts application/x-ndjson: a Progress line once the
// letters are checked and then at most once a second, and a last line
// with the Result and, when the replay stopped short, the Error.
type DLQReplayLine struct {
	Progress *DLQReplayProgress `json:"progress,omitempty"`
	Result   *DLQReplayResult   `json:"result,omitempty"`
	Error    *ErrorBody         `json:"error,omitempty"`
}

// DLQReplayProgress is how far a replay is: Replayed of Total dead
// letters (a group counts one).
type DLQReplayProgress struct {
	Replayed int `json:"replayed"`
	Total    int `json:"total"`
}

// DLQReplayResult is what a replay did: how many dead letters it sent
// back (a group counts one).
type DLQReplayResult struct {
	Replayed int `json:"replayed"`
}

// removeDLQ serves POST /admin/v1/dlq/remove {"seqs": [..]}: seqs is
// required and not empty, as removed usage is lost for good (there is
// no "remove all", unlike replay).
func (a *Admin) removeDLQ(w http.ResponseWriter, r *http.Request) {
	d, ok := a.deadLetters(w, r)
	if !ok {
		return
	}
	var in struct {
		Seqs []uint64 `json:"seqs"`
	}
	if err := decode(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	if len(in.Seqs) == 0 {
		a.fail(w, r, &ledger.Error{Code: ledger.EInvalid, Message: "seqs: required, the sequences of the dead letters to remove (tollgate dlq list shows them); there is no remove-all"})
		return
	}
	if err := checkSeqs(in.Seqs); err != nil {
		a.fail(w, r, err)
		return
	}
	n, err := d.Remove(r.Context(), in.Seqs)
	a.respond(w, r, http.StatusOK, map[string]int{"removed": n}, dlqError(err))
}

// checkSeqs refuses sequence 0, which JetStream refuses as a bad request.
func checkSeqs(seqs []uint64) error {
	if slices.Contains(seqs, 0) {
		return &ledger.Error{Code: ledger.EInvalid, Message: "seqs: 0 is not a dead letter's sequence; sequences start at 1 (tollgate dlq list shows them)"}
	}
	return nil
}

// dlqError is err of Replay or Remove as the API answers it: not found
// or a conflict when it says so (DeadLetters), else as it is.
func dlqError(err error) error {
	var nf interface{ NotFound() bool }
	var cf interface{ Conflict() bool }
	switch {
	case errors.As(err, &nf) && nf.NotFound():
		return &ledger.Error{Code: ledger.ENotFound, Message: err.Error()}
	case errors.As(err, &cf) && cf.Conflict():
		return &ledger.Error{Code: ledger.EConflict, Message: err.Error()}
	}
	return err
}
