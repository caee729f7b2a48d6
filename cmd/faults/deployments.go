package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// failEast makes upstream-sim's deployment east answer every request
// with 503 (Retry-After 1): the gateway retries each on west and rests
// east, trying it again once its cool-down ends.
func failEast(ctx context.Context, s *stack) error {
	return s.simFaults(ctx, "east", `{"fail_all":true,"status":503}`)
}

// simFaults posts fault knobs for one of upstream-sim's deployments.
func (s *stack) simFaults(ctx context.Context, name, knobs string) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+s.simAddr+"/d/"+name+"/faults", bytes.NewBufferString(knobs))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("faults for %s: %s", name, resp.Status)
	}
	return nil
}

// checkDeployments holds the ledger to upstream-sim deployment by
// deployment: for each, the events and attempts the ledger holds (charged
// or not) against the requests it served and the tokens it billed. It
// also checks that east served nothing, that its failures were recorded
// as attempts not charged, and that every client got an answer from west.
func checkDeployments(ctx context.Context, s *stack, rw *row, st0, st1 sim.Stats, from, to time.Time) error {
	defer s.simFaults(context.WithoutCancel(ctx), "east", `{}`) //nolint:errcheck // the knobs off again, best effort
	led := map[string]tally{}
	notCharged := map[string]int64{}
	rows, err := s.db.Query(ctx, `
		SELECT deployment, charged, count(*), coalesce(sum(prompt_tokens), 0)::bigint, coalesce(sum(cached_tokens), 0)::bigint,
		  coalesce(sum(completion_tokens), 0)::bigint, coalesce(sum(reasoning_tokens), 0)::bigint
		FROM (SELECT deployment, true AS charged, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, customer_id, occurred_at
		      FROM usage_events
		      UNION ALL
		      SELECT deployment, false, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, customer_id, occurred_at
		      FROM usage_attempts) e
		WHERE customer_id = $3 AND occurred_at >= $1 AND occurred_at <= $2 AND deployment IN ('east', 'west')
		GROUP BY 1, 2`, from, to, s.customer)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var charged bool
		var t tally
		if err := rows.Scan(&name, &charged, &t.requests, &t.prompt, &t.cached, &t.completion, &t.reasoning); err != nil {
			return err
		}
		led[name] = led[name].add(t)
		if !charged {
			notCharged[name] += t.requests
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var lines []string
	pass := true
	names := []string{"east", "west"}
	sort.Strings(names)
	for _, name := range names {
		c1, c0 := st1.ByDeployment[name], st0.ByDeployment[name]
		want := tally{c1.Requests.Total - c0.Requests.Total, c1.PromptTokens - c0.PromptTokens, c1.CachedTokens - c0.CachedTokens,
			c1.CompletionTokens - c0.CompletionTokens, c1.ReasoningTokens - c0.ReasoningTokens}
		got := led[name]
		if d := got.discrepancy(want); d != 0 {
			pass = false
			lines = append(lines, fmt.Sprintf("%s: ledger %s; upstream-sim %s", name, got, want))
		} else {
			lines = append(lines, fmt.Sprintf("%s: %d requests, %d+%d tokens, %d not charged", name, got.requests, got.prompt,
				got.completion, notCharged[name]))
		}
	}
	east := st1.ByDeployment["east"].Requests
	eastOK := east.OK - st0.ByDeployment["east"].Requests.OK
	eastFailed := east.Status - st0.ByDeployment["east"].Requests.Status
	rw.checks = append(rw.checks,
		check{name: "ledger per deployment equals upstream-sim", pass: pass, detail: strings.Join(lines, "; ")},
		check{name: "the failing deployment's attempts not charged", pass: eastOK == 0 && eastFailed > 0 && notCharged["east"] == eastFailed,
			detail: fmt.Sprintf("east failed %d requests, served %d; %d attempts not charged", eastFailed, eastOK, notCharged["east"])})
	r := rw.sent - rw.failed
	rw.addNote("east failed %d attempts, each retried on west; %d of %d requests answered", eastFailed, r, rw.sent)
	return nil
}
