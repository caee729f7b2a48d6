package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// spoolPoison appends records to the spool of the gateway, which must be
// dead (kill -9'd: the spool has one writer), through meter.Spool itself:
//
//   - a record of 1.5 MiB, over NATS' max_payload, that is no valid event
//     (schema version 2): no republish can fix it, so it must go to the
//     dead-letter stream with the reason;
//   - an event of 1.5 MiB (its model name): the republisher normalizes a
//     spooled event before it publishes it (the model is cut to 256 bytes),
//     so max_payload can no longer refuse it, and it must land in the
//     ledger with model_truncated;
//   - three ordinary events after them, which must still be published.
//
// All are the foreign customer's, so that the load's figures stay apart.
func (s *stack) spoolPoison(rw *row) error {
	sp, err := meter.OpenSpool(filepath.Join(s.gwData, "spool"), 0)
	if err != nil {
		return err
	}
	big := strings.Repeat("m", 1536<<10)
	bad := s.foreignEvent("sim-small", usage.Tokens{PromptTokens: 10, CompletionTokens: 5})
	bad.Version, bad.Error = 2, big
	data, _ := json.Marshal(bad)
	err = sp.AppendRecord(data)
	s.poison = append(s.poison, poisonItem{kind: pSpoolInvalid, id: bad.ID, fate: fateDLQ, reason: "not a valid usage event", err: err})
	e := s.foreignEvent("sim-small-"+big, usage.Tokens{PromptTokens: 20, CompletionTokens: 8})
	err = sp.Append(&e)
	s.poison = append(s.poison, poisonItem{kind: pSpoolBig, id: e.ID, fate: fateLedger, err: err,
		codes: []string{"model_truncated"}, want: &tally{requests: 1, prompt: 20, completion: 8}})
	for i := range 3 {
		e := s.foreignEvent("sim-small", usage.Tokens{PromptTokens: 11 + int64(i), CompletionTokens: 3})
		err = sp.Append(&e)
		s.poison = append(s.poison, poisonItem{kind: pSpoolAfter, id: e.ID, fate: fateLedger, err: err,
			want: &tally{requests: 1, prompt: 11 + int64(i), completion: 3}})
	}
	rw.addNote("appended to its spool while it was dead: a 1.5 MiB invalid record, a 1.5 MiB event, 3 events")
	return sp.Close()
}

// stored is what the ledger holds of one event.
type stored struct {
	corrections string
	t           tally
}

// checkPoison waits (up to 30s: spooled records are republished every
// second) until every poison event is where it must be, then returns one
// check per kind, and one that the dead-letter stream holds nothing else.
func (s *stack) checkPoison(ctx context.Context) []check {
	var verdicts map[string][]string // kind -> failures
	var letters []usage.DeadLetter
	var lerr error
	_ = waitFor(ctx, 30*time.Second, func() error {
		verdicts, letters, lerr = s.judgePoison(ctx)
		if lerr != nil {
			return lerr
		}
		for _, f := range verdicts {
			if len(f) > 0 {
				return fmt.Errorf("poison not yet where it belongs")
			}
		}
		return nil
	})
	if lerr != nil {
		return []check{{name: "poison", detail: lerr.Error()}}
	}
	var out []check
	for _, kind := range poisonKinds {
		n, reasons := 0, map[string]bool{}
		var f fate
		for _, it := range s.poison {
			if it.kind == kind {
				n, f = n+1, it.fate
			}
		}
		if n == 0 {
			continue
		}
		for _, l := range letters {
			for _, it := range s.poison {
				if it.kind == kind && it.id == l.EventID {
					reasons[l.Reason] = true
				}
			}
		}
		bad := verdicts[kind]
		detail := fmt.Sprintf("%d of %d %s", n-len(bad), n, fatePhrase(f, kind))
		if f == fateDLQ && len(reasons) > 0 {
			detail += "; reason: " + strings.Join(slices.Sorted(maps.Keys(reasons)), " | ")
		}
		if len(bad) > 0 {
			detail += "; " + strings.Join(bad, "; ")
		}
		out = append(out, check{name: "poison: " + kind, pass: len(bad) == 0, detail: detail})
	}
	var stray []string
	for _, l := range letters {
		if !slices.ContainsFunc(s.poison, func(it poisonItem) bool { return it.fate == fateDLQ && it.id == l.EventID }) {
			stray = append(stray, fmt.Sprintf("seq %d (event %q): %s", l.Seq, l.EventID, l.Reason))
		}
	}
	out = append(out, check{name: "dead letters are the poison alone", pass: len(stray) == 0,
		detail: fmt.Sprintf("%d dead letters, %d not injected ones %v", len(letters), len(stray), stray)})
	return out
}

func fatePhrase(f fate, kind string) string {
	switch {
	case f == fateRefused:
		return "answered 400 with an X-Request-Id and left no event (no upstream call: the phase's request count holds)"
	case f == fateDLQ:
		return "in the dead-letter stream with a reason"
	case kind == pSpoolAfter:
		return "published after them and in the ledger with their figures"
	}
	return "in the ledger with the expected corrections and figures"
}

// judgePoison looks up every poison event in the ledger and the
// dead-letter stream, and returns the failures by kind.
func (s *stack) judgePoison(ctx context.Context) (map[string][]string, []usage.DeadLetter, error) {
	var ids []string
	for _, it := range s.poison {
		if it.id != "" {
			ids = append(ids, it.id)
		}
	}
	got := map[string]stored{}
	rows, err := s.db.Query(ctx, `SELECT id::text, corrections, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens
		FROM usage_events WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var id string
		st := stored{t: tally{requests: 1}}
		if err := rows.Scan(&id, &st.corrections, &st.t.prompt, &st.t.cached, &st.t.completion, &st.t.reasoning); err != nil {
			rows.Close()
			return nil, nil, err
		}
		got[id] = st
	}
	rows.Close()
	var dl struct{ Data []usage.DeadLetter }
	if err := s.adminDo(ctx, "GET", "/admin/v1/dlq?limit=10000", "", &dl); err != nil {
		return nil, nil, fmt.Errorf("GET /admin/v1/dlq: %w", err)
	}
	verdicts := map[string][]string{}
	for _, it := range s.poison {
		if msg := judge(it, got, dl.Data); msg != "" {
			verdicts[it.kind] = append(verdicts[it.kind], msg)
		}
	}
	return verdicts, dl.Data, nil
}

// judge says what is wrong with one poison event, or "".
func judge(it poisonItem, got map[string]stored, letters []usage.DeadLetter) string {
	if it.err != nil {
		return fmt.Sprintf("%s: injection failed: %v", it.id, it.err)
	}
	st, inLedger := got[it.id]
	i := slices.IndexFunc(letters, func(l usage.DeadLetter) bool { return l.EventID == it.id })
	switch it.fate {
	case fateRefused:
		if inLedger {
			return it.id + ": has an event"
		}
	case fateDLQ:
		switch {
		case inLedger:
			return it.id + ": in the ledger"
		case i < 0:
			return it.id + ": not in the dead-letter stream"
		case !strings.Contains(letters[i].Reason, it.reason):
			return fmt.Sprintf("%s: reason %q, want one about %q", it.id, letters[i].Reason, it.reason)
		}
	case fateLedger:
		switch {
		case !inLedger:
			return it.id + ": not in the ledger"
		case it.want != nil && st.t != *it.want:
			return fmt.Sprintf("%s: holds %s, want %s", it.id, st.t, *it.want)
		case it.estimated && (st.t.requests != 1 || st.t.prompt <= 0 || st.t.completion <= 0 || st.t.cached != 0 || st.t.reasoning > st.t.completion):
			return fmt.Sprintf("%s: holds %s, want one request with its prompt and completion estimated, no cached tokens, reasoning within the completion", it.id, st.t)
		}
		for _, c := range it.codes {
			if !slices.Contains(strings.Split(st.corrections, ","), c) {
				return fmt.Sprintf("%s: corrections %q lack %s", it.id, st.corrections, c)
			}
		}
	}
	return ""
}
