package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/ledger"
)

// tally is requests and the four token classes, from either side.
type tally struct {
	requests, prompt, cached, completion, reasoning int64
}

func (t tally) add(o tally) tally {
	return tally{t.requests + o.requests, t.prompt + o.prompt, t.cached + o.cached,
		t.completion + o.completion, t.reasoning + o.reasoning}
}

// tokens is prompt plus completion tokens: what the unbilled share counts.
func (t tally) tokens() int64 { return t.prompt + t.completion }

func (t tally) sub(o tally) tally {
	return tally{t.requests - o.requests, t.prompt - o.prompt, t.cached - o.cached,
		t.completion - o.completion, t.reasoning - o.reasoning}
}

// discrepancy sums the absolute differences of every field.
func (t tally) discrepancy(o tally) int64 {
	d := t.sub(o)
	abs := func(v int64) int64 { return max(v, -v) }
	return abs(d.requests) + abs(d.prompt) + abs(d.cached) + abs(d.completion) + abs(d.reasoning)
}

func (t tally) String() string {
	return fmt.Sprintf("requests %d, prompt %d, cached %d, completion %d, reasoning %d",
		t.requests, t.prompt, t.cached, t.completion, t.reasoning)
}

// simStats reads upstream-sim's ground truth.
func (s *stack) simStats(ctx context.Context) (sim.Stats, error) {
	var st sim.Stats
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.simAddr+"/stats", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func simTally(st sim.Stats) tally {
	return tally{st.Requests.Total, st.PromptTokens, st.CachedTokens, st.CompletionTokens, st.ReasoningTokens}
}

// simQuiet waits until upstream-sim has no request in flight (streams the
// gateway drains after their client left included) and returns its stats.
func (s *stack) simQuiet(ctx context.Context, timeout time.Duration) (st sim.Stats, err error) {
	err = waitFor(ctx, timeout, func() error {
		if st, err = s.simStats(ctx); err != nil {
			return err
		}
		if st.Requests.InFlight != 0 {
			return fmt.Errorf("upstream-sim still has %d requests in flight", st.Requests.InFlight)
		}
		return nil
	})
	return st, err
}

// duplicatesRefused is the ledger's count of deliveries refused as
// already stored.
func (s *stack) duplicatesRefused(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT coalesce((SELECT value FROM ingest_counters WHERE name = 'duplicates'), 0)`).Scan(&n)
	return n, err
}

// integrity is what the final checks found.
type integrity struct {
	duplicateIDs, events, eventIDs int64
	attempts                       int64 // in usage_attempts (not charged), every customer's
	loadAttempts                   tally // of those, the load customer's: in the ledger side, not in the rollups
	allEvents                      tally // usage_events, every customer's (the foreign one's too)
	rollups                        tally // from usage_hourly, all of it
	admin                          tally // GET /admin/v1/usage?group_by=customer
	recon                          string
	reconClean                     bool
	byStatus                       string // the ledger's events by status
}

// checkIntegrity looks for event ids stored twice, events without their
// dedupe key, rollups that disagree with the events, and asks for the
// ledger's reconciliation over the run.
func (s *stack) checkIntegrity(ctx context.Context, from time.Time) (integrity, error) {
	var in integrity
	err := s.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM (SELECT id FROM (SELECT id FROM usage_events UNION ALL SELECT id FROM usage_attempts) a
		  GROUP BY id HAVING count(*) > 1) d),
		(SELECT count(*) FROM usage_events), (SELECT count(*) FROM event_ids), (SELECT count(*) FROM usage_attempts)`,
	).Scan(&in.duplicateIDs, &in.events, &in.eventIDs, &in.attempts)
	if err != nil {
		return in, err
	}
	err = s.db.QueryRow(ctx, `SELECT count(*), coalesce(sum(prompt_tokens), 0)::bigint, coalesce(sum(cached_tokens), 0)::bigint,
		coalesce(sum(completion_tokens), 0)::bigint, coalesce(sum(reasoning_tokens), 0)::bigint FROM usage_attempts WHERE customer_id = $1`,
		s.customer).Scan(&in.loadAttempts.requests, &in.loadAttempts.prompt, &in.loadAttempts.cached, &in.loadAttempts.completion,
		&in.loadAttempts.reasoning)
	if err != nil {
		return in, err
	}
	err = s.db.QueryRow(ctx, `SELECT count(*), coalesce(sum(prompt_tokens), 0)::bigint, coalesce(sum(cached_tokens), 0)::bigint,
		coalesce(sum(completion_tokens), 0)::bigint, coalesce(sum(reasoning_tokens), 0)::bigint FROM usage_events`,
	).Scan(&in.allEvents.requests, &in.allEvents.prompt, &in.allEvents.cached, &in.allEvents.completion, &in.allEvents.reasoning)
	if err != nil {
		return in, err
	}
	err = s.db.QueryRow(ctx, `SELECT coalesce(sum(requests), 0)::bigint, coalesce(sum(prompt_tokens), 0)::bigint,
		coalesce(sum(cached_tokens), 0)::bigint, coalesce(sum(completion_tokens), 0)::bigint, coalesce(sum(reasoning_tokens), 0)::bigint
		FROM usage_hourly`).Scan(&in.rollups.requests, &in.rollups.prompt, &in.rollups.cached, &in.rollups.completion, &in.rollups.reasoning)
	if err != nil {
		return in, err
	}
	rows, err := s.db.Query(ctx, `SELECT status || ' ' || usage_source || ': ' || count(*) FROM usage_events GROUP BY status, usage_source ORDER BY 1`)
	if err != nil {
		return in, err
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return in, err
		}
		in.byStatus += line + "; "
	}
	if err := rows.Err(); err != nil {
		return in, err
	}
	var usage struct{ Data []ledger.UsageRow }
	if err := s.adminDo(ctx, "GET", "/admin/v1/usage?group_by=customer&customer_id="+s.customer, "", &usage); err != nil {
		return in, fmt.Errorf("admin usage: %w", err)
	}
	for _, r := range usage.Data {
		in.admin = tally{in.admin.requests + r.Requests, in.admin.prompt + r.PromptTokens, in.admin.cached + r.CachedTokens,
			in.admin.completion + r.CompletionTokens, in.admin.reasoning + r.ReasoningTokens}
	}
	in.recon, in.reconClean, err = s.reconcile(ctx, from.Add(-time.Hour), time.Now().Add(time.Hour))
	return in, err
}

// reconcile asks the admin API for the ledger's reconciliation; where the
// endpoint is not served (404), it runs the same ledger.Reconcile itself.
func (s *stack) reconcile(ctx context.Context, from, to time.Time) (string, bool, error) {
	var rec ledger.Reconciliation
	q := url.Values{"from": {from.UTC().Format(time.RFC3339)}, "to": {to.UTC().Format(time.RFC3339)}}
	err := s.adminDo(ctx, "GET", "/admin/v1/reconciliation?"+q.Encode(), "", &rec)
	via := "GET /admin/v1/reconciliation"
	if he := (*httpError)(nil); errors.As(err, &he) && he.status == http.StatusNotFound {
		via = "ledger.Reconcile (the endpoint answered 404)"
		store, oerr := ledger.Open(ctx, s.pg.URL())
		if oerr != nil {
			return "", false, oerr
		}
		defer store.Close()
		rec, err = store.Reconcile(ctx, from, to)
	}
	if err != nil {
		return "", false, fmt.Errorf("reconciliation: %w", err)
	}
	return fmt.Sprintf("%s: clean=%v events=%d event_ids=%d rollup_mismatches=%d balance_mismatches=%d duplicate_ids=%d duplicates_rejected=%d unpriced=%d",
		via, rec.Clean, rec.Events, rec.EventIDs, rec.RollupMismatchCount, len(rec.BalanceMismatches), rec.DuplicateIDs,
		rec.DuplicatesRejected, rec.UnpricedEvents), rec.Clean, nil
}

// settle waits until the ledger holds an event for each request
// upstream-sim saw in [from, to] (want of them) and the meter's consumer
// has nothing pending or unacknowledged.
func (s *stack) settle(ctx context.Context, from, to time.Time, want int64, timeout time.Duration) error {
	return waitFor(ctx, timeout, func() error {
		got, err := s.ledgerTally(ctx, from, to)
		if err != nil {
			return err
		}
		if got.requests < want {
			return fmt.Errorf("ledger holds %d of %d events", got.requests, want)
		}
		ci, err := s.consumerInfo(ctx)
		if err != nil {
			return err
		}
		if ci.pending != 0 || ci.ackPending != 0 {
			return fmt.Errorf("meter consumer: %d pending, %d unacknowledged", ci.pending, ci.ackPending)
		}
		return nil
	})
}
