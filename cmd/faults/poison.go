package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// fate is what must become of a poison event.
type fate int

const (
	fateRefused fate = iota // the gateway answers 400 (with an X-Request-Id) before any upstream call; no event
	fateLedger              // in the ledger, with its correction codes
	fateDLQ                 // in the dead-letter stream, with a reason
)

// poisonItem is one poison event the suite injected.
type poisonItem struct {
	kind  string   // what it is, as the report names it
	id    string   // its X-Request-Id, or the id it was published or spooled under
	fate  fate     // what must become of it
	codes []string // fateLedger: the correction codes the event must carry
	want  *tally   // fateLedger: the figures the event must hold (nil: not checked)
	// estimated, with fateLedger: the report was no bill, so the event's
	// prompt and completion must be estimates (neither 0), its cached
	// tokens 0, and its reasoning tokens the hidden-reasoning estimate at
	// most (within the completion).
	estimated bool
	// reason is a phrase the dead letter's reason must hold (fateDLQ).
	reason string
	err    error // the injection itself went wrong
}

// Poison kinds, in the order the report lists them.
const (
	pClientNUL     = "client model with a NUL"
	pClientInvalid = "client model of invalid UTF-8 or over 256 bytes"
	pServedNUL     = "upstream served model with a NUL"
	pNegative      = "upstream negative token counts"
	pForeign       = "foreign event: NUL model, counts beyond 2^62"
	pUndecodable   = "undecodable message on the usage subject"
	pSpoolInvalid  = "oversized spool record (1.5 MiB, no valid event)"
	pSpoolBig      = "oversized spool event (1.5 MiB model)"
	pSpoolAfter    = "spool records after the oversized ones"
)

var poisonKinds = []string{pClientNUL, pClientInvalid, pServedNUL, pNegative, pForeign, pUndecodable, pSpoolInvalid, pSpoolBig, pSpoolAfter}

// injectPoison sends, in four rounds spread over the phase's load, poison
// from each side: a client's model name no event could carry, an upstream
// that serves a model name with a NUL or reports negative counts, and
// messages published straight to the usage subject, as a foreign or older
// publisher would: an event with a NUL model and counts beyond 2^62 (three
// of them in one hour would overflow a bigint rollup, unclamped), and bytes
// that are no event at all. The load customer's poison events are left out
// of the phase's comparison (rw.exclude, rw.simPoison) and checked one by
// one at the end (checkPoison).
func injectPoison(ctx context.Context, s *stack, _ *run, rw *row) error {
	subject, err := s.usageSubject(ctx)
	if err != nil {
		return err
	}
	for round := range 4 {
		if round > 0 {
			if err := sleep(ctx, 1200*time.Millisecond); err != nil {
				return err
			}
		}
		model := []string{"sim/x\x00y", "sim-pro\x00"}[round%2]
		s.poisonRequest(ctx, rw, pClientNUL, model, nil)
		switch round {
		case 0:
			s.poisonRequest(ctx, rw, pClientInvalid, "sim-pro\xff\xfe", nil)
		case 1:
			s.poisonRequest(ctx, rw, pClientInvalid, "sim/"+strings.Repeat("m", 300), nil)
		}
		stream := round%2 == 0
		s.poisonRequest(ctx, rw, pServedNUL, "sim-pro", map[string]any{"stream": stream,
			"metadata": map[string]string{"sim_served_model": "sim-pro\x00evil", "sim_chunks": "3"}})
		s.poisonRequest(ctx, rw, pNegative, "sim-pro", map[string]any{"stream": !stream,
			"metadata": map[string]string{"sim_fault": "negative_usage", "sim_chunks": "3"}})
		if round < 3 {
			s.publishForeign(ctx, subject, round)
			s.publishUndecodable(ctx, subject, round)
		}
	}
	n := map[string]int{}
	for _, it := range s.poison {
		n[it.kind]++
	}
	rw.note = fmt.Sprintf("poison in the load: %d client models with a NUL and %d invalid (400), %d served models with a NUL and %d negative usages "+
		"from upstream-sim (left out of both sides: upstream-sim billed them %s), %d foreign events and %d undecodable messages on the usage subject",
		n[pClientNUL], n[pClientInvalid], n[pServedNUL], n[pNegative], rw.simPoison, n[pForeign], n[pUndecodable])
	return nil
}

// poisonRequest sends one chat completion through the gateway with model
// and the extra fields, reads the whole answer, and records what must
// become of it: a 400 for a model no event could carry, else an event
// whose exact figures upstream-sim's rules give.
func (s *stack) poisonRequest(ctx context.Context, rw *row, kind, model string, extra map[string]any) {
	it := poisonItem{kind: kind, fate: fateRefused}
	req := map[string]any{"model": model, "max_tokens": 12, "stream_options": map[string]bool{"include_usage": true},
		"messages": []map[string]string{{"role": "user", "content": "poison " + kind}}}
	for k, v := range extra {
		req[k] = v
	}
	if req["stream"] != true {
		delete(req, "stream_options")
	}
	body, _ := json.Marshal(req)
	if strings.Contains(model, "\xff") { // json.Marshal would make it valid UTF-8: send the bytes themselves
		body = bytes.Replace(body, []byte(`\ufffd\ufffd`), []byte("\xff\xfe"), 1)
	}
	defer func() { s.poison = append(s.poison, it) }()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.loader.url, bytes.NewReader(body))
	hreq.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := s.loader.client.Do(hreq)
	if err != nil {
		it.err = err
		return
	}
	defer resp.Body.Close()
	var t tail
	_, err = io.Copy(&t, resp.Body)
	it.id = resp.Header.Get("X-Request-Id")
	if kind == pClientNUL || kind == pClientInvalid {
		if resp.StatusCode != http.StatusBadRequest || it.id == "" {
			it.err = fmt.Errorf("want 400 with an X-Request-Id, got %s with %q", resp.Status, it.id)
		}
		return
	}
	if resp.StatusCode != http.StatusOK || err != nil || (req["stream"] == true && !t.done()) {
		it.err = fmt.Errorf("want a complete 200 answer, got %s (%v)", resp.Status, err)
	}
	u, uerr := sim.ExpectedUsage(body)
	if uerr != nil {
		it.err = uerr
		return
	}
	it.fate = fateLedger
	if it.id != "" {
		rw.exclude = append(rw.exclude, it.id)
	} else if it.err == nil {
		it.err = fmt.Errorf("no X-Request-Id")
	}
	rw.simPoison = rw.simPoison.add(tally{1, u.PromptTokens, u.CachedTokens, u.CompletionTokens, u.ReasoningTokens})
	switch kind {
	case pServedNUL: // only the name is cleaned: the figures are the provider's
		it.codes, it.want = []string{"served_model_cleaned"}, &tally{1, u.PromptTokens, u.CachedTokens, u.CompletionTokens, u.ReasoningTokens}
	case pNegative: // every count reported negative: no bill, so what was relayed is estimated; the rest clamped to 0
		it.codes, it.estimated = []string{usage.CorrectionNegative}, true
	}
}

// usageSubject is the usage stream's subject, as the stream says.
func (s *stack) usageSubject(ctx context.Context) (string, error) {
	st, err := s.js.Stream(ctx, "TOLLGATE_USAGE")
	if err != nil {
		return "", err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return "", err
	}
	return info.Config.Subjects[0], nil
}

// foreignEvent is a schema v1 event of the foreign customer, stamped now.
func (s *stack) foreignEvent(model string, u usage.Tokens) usage.Event {
	return usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: time.Now().UTC(),
		CustomerID: s.foreign, KeyID: s.foreignKey, Provider: "sim", Model: model, Endpoint: "/v1/chat/completions",
		Status: usage.StatusOK, HTTPStatus: 200, Usage: u, UsageSource: usage.SourceUpstream}
}

// publishForeign publishes, straight to the usage subject, an event with
// a NUL in its model and counts beyond 2^62: the worker normalizes it.
func (s *stack) publishForeign(ctx context.Context, subject string, i int) {
	const huge = 1 << 62
	e := s.foreignEvent("sim-pro\x00foreign", usage.Tokens{PromptTokens: huge + int64(i), CachedTokens: huge,
		CompletionTokens: huge + 7, ReasoningTokens: huge})
	data, _ := json.Marshal(e)
	_, err := s.js.Publish(ctx, subject, data, jetstream.WithMsgID(e.ID))
	s.poison = append(s.poison, poisonItem{kind: pForeign, id: e.ID, fate: fateLedger, err: err,
		codes: []string{"model_cleaned", usage.CorrectionOverMax},
		want:  &tally{1, usage.MaxCount, usage.MaxCount, usage.MaxCount, usage.MaxCount}})
}

// publishUndecodable publishes bytes that are no usage event to the usage
// subject: the worker must set them aside with the reason.
func (s *stack) publishUndecodable(ctx context.Context, subject string, i int) {
	id := uuid.NewString()
	data := []byte(fmt.Sprintf(`{"v":1,"id":"%s","usage":{"prompt_tokens":"twelve"}} and then %d bytes of garbage`, id, i))
	_, err := s.js.Publish(ctx, subject, data, jetstream.WithMsgID(id))
	s.poison = append(s.poison, poisonItem{kind: pUndecodable, id: id, fate: fateDLQ, reason: "undecodable", err: err})
}
