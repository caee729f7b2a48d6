package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// prepared is one attempt with its upstream request: the path below the
// provider's base URL (with any query) and the body.
type prepared struct {
	attempt
	path string
	body []byte
}

// prepareAttempts plans the attempts of a request by key routed as rt
// (see router.plan; ok filters the deployments) and prepares each one's
// upstream request with prep, for its provider and upstream model. An
// attempt prep refuses is dropped; when it refuses them all, its error for
// the first is returned (the client's fault: a field no provider of the
// route can take). An attempt whose model key could not be held to its
// spend limits (checkCurrency) is dropped too; when every attempt is, the
// error is checkCurrency's provider.Error. It returns at most
// RetryConfig.MaxAttempts attempts, of which at most one to a resting
// deployment (the first the plan names that is not dropped; see bounded).
func (s *Server) prepareAttempts(key *usage.KeyState, rt route, ok func(string, *deployment) bool,
	prep func(a attempt) (path string, body []byte, err error)) ([]prepared, error) {
	var out []prepared
	var first error
	plan, ready := s.routes.plan(rt, ok)
	probed := false // an attempt to a resting deployment is prepared
	for i, a := range plan {
		if probed {
			break // one is all (the plan names the resting ones last)
		}
		refusal := s.checkPrefix(key, a)
		if refusal == nil {
			refusal = s.checkCurrency(key, a.model)
		}
		if refusal != nil {
			if first == nil {
				first = *refusal
			}
			continue
		}
		path, body, err := prep(a)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, prepared{attempt: a, path: path, body: body})
		probed = i >= ready
		if len(out) == s.cfg.Retry.MaxAttempts {
			break
		}
	}
	if len(out) == 0 {
		if first == nil {
			first = errNoRoute
		}
		return nil, first
	}
	return out, nil
}

// checkPrefix refuses attempt a when its model is a "provider/model" name
// the model table does not hold (one the client chose) and its provider's
// PrefixRoutes is PrefixPriced, unless the model has a price in force or
// a custom price for key's customer: 402 unpriced_model, or 503
// prices_unavailable while the gateway has not loaded the price book.
func (s *Server) checkPrefix(key *usage.KeyState, a attempt) *provider.Error {
	if s.rates == nil || a.dep.provider.PrefixRoutes == PrefixAll {
		return nil
	}
	if _, table := s.routes.models[a.model]; table {
		return nil
	}
	e := &usage.Event{Model: a.model, Time: time.Now()}
	if key != nil {
		e.CustomerID = key.CustomerID
	}
	r, ok := s.rates.Rate(e)
	switch {
	case !ok:
		pe := provider.Err(http.StatusServiceUnavailable, "service_unavailable", "prices_unavailable",
			fmt.Sprintf("the model %q is served only with a price in force, and the gateway cannot read the price book now; retry shortly", a.model))
		return &pe
	case r.Unpriced:
		pe := provider.Err(http.StatusPaymentRequired, "insufficient_quota", "unpriced_model",
			fmt.Sprintf("the model %q has no price in force: a provider/model name outside the model table is served only "+
				"once it is priced (the operator adds a price, or sets prefix_routes: all on the provider %q)", a.model, a.dep.provider.Name))
		return &pe
	}
	return nil
}

// checkCurrency refuses a request by key for model when the key's spend
// is limited (usage.KeyState.SpendLimited) and no limit could count the
// request's charge: it would be in a currency that is not its customer's
// (402 currency_mismatch), or the model has no price in force, so it would
// be stored at cost 0 until re-rated (402 unpriced_model). The charge's
// currency is that of the price in force now, or of the customer's custom
// price, as the gateway's Rater holds them. While the Rater cannot rate
// (its price book not loaded yet: NATS was down when the gateway started),
// a limited key is refused with 503 rather than served unchecked.
func (s *Server) checkCurrency(key *usage.KeyState, model string) *provider.Error {
	if key == nil || !key.SpendLimited || key.Currency == "" || s.rates == nil {
		return nil
	}
	r, ok := s.rates.Rate(&usage.Event{CustomerID: key.CustomerID, Model: model, Time: time.Now()})
	switch {
	case !ok:
		e := provider.Err(http.StatusServiceUnavailable, "service_unavailable", "prices_unavailable",
			"this API key has spend limits, and the gateway cannot read the price book to hold them now; retry shortly")
		return &e
	case r.Unpriced:
		e := provider.Err(http.StatusPaymentRequired, "insufficient_quota", "unpriced_model",
			fmt.Sprintf("the model %q has no price in force, and this API key has spend limits: "+
				"its charges could not be held to them", model))
		return &e
	case r.Currency == key.Currency:
		return nil
	}
	e := provider.Err(http.StatusPaymentRequired, "insufficient_quota", "currency_mismatch",
		fmt.Sprintf("the model %q is priced in %s, and this API key's spend limits are in %s: "+
			"with no exchange rate, its charges could not be held to them", model, r.Currency, key.Currency))
	return &e
}

// attemptsError is the refusal of a request prepareAttempts found no
// attempt for: its provider.Error, else 400 with err's message.
func attemptsError(err error) provider.Error {
	var pe provider.Error
	if errors.As(err, &pe) {
		return pe
	}
	return badRequest(err.Error())
}

// serveAttempts serves a request by its attempts, in order, each one an
// exchange of its own (its own usage event): run makes the attempt's
// upstream call and relays its answer. An attempt that fails before the
// client got its first byte (a connect error or timeout, a 408, 429 or 5xx, a
// stream that broke or stalled before its first event, a 200 whose body
// or first event is the provider's error: see errorUnder200) writes nothing to
// the client while another attempt may follow within RetryConfig.Budget:
// its event is the operator's cost (not charged), and the next attempt
// goes on. The last attempt's outcome, success or failure, is the
// client's, and its event, under the request's id, is charged as every
// event is. Each attempt moves its deployment's health (see deployment).
func (s *Server) serveAttempts(w http.ResponseWriter, r *http.Request, attempts []prepared, endpoint string, stream bool,
	env provider.Envelope, run func(x *exchange, p prepared)) {
	// spend: hold what the request may cost against its key's spend
	// limits and its customer's credit, until it ends (spendHolds).
	if !s.holdSpend(w, r, attempts, endpoint, env) {
		return
	}
	until := time.Now().Add(s.cfg.Retry.Budget)
	for i, p := range attempts {
		x := s.newExchange(w, r, p.route(), endpoint, stream, env)
		x.event.Attempt = i + 1
		x.upBody, x.upPath = p.body, p.path
		// An attempt begun with nothing left of request_timeout (its
		// context ended already: newExchange) is the last.
		x.canRetry, x.retryUntil = i+1 < len(attempts) && x.cause() == nil, until
		s.runAttempt(x, p, run)
		x.wmu.Lock()
		cut := x.cut // a shutdown answered the client meanwhile
		x.wmu.Unlock()
		if !x.retry || cut {
			x.held.end(x) // done by finish, unless a cut-off came after it
			return
		}
		if s.metrics != nil {
			s.metrics.retries.WithLabelValues(x.event.Provider, x.event.Deployment).Inc()
		}
	}
}

// spendHold is a request's hold on its key's spend limits and its
// customer's credit (spendHolds.hold): its release, which the request's
// last attempt calls with its charge as it finishes (exchange.finish). A
// nil *spendHold holds nothing.
type spendHold struct {
	release func(charge int64, at time.Time)
	ended   bool // (on the request's goroutine)
}

// holdSpend holds what the request r, to be served by attempts, may cost
// (holdEstimate) against its key's spend limits and its customer's
// credit, in r's requestState, where its exchanges find it (newExchange);
// or, having answered the refusal in env (429 spend_held, 402, or 401 for
// a key revoked meanwhile), reports false. A key without any holds
// nothing. It is apart from serveAttempts, whose frame stays on a stream's
// stack for the stream's whole life (see headerFlusher): it spends none of
// it.
//
//go:noinline
func (s *Server) holdSpend(w http.ResponseWriter, r *http.Request, attempts []prepared, endpoint string, env provider.Envelope) bool {
	key, st := keyOf(r), stateOf(r)
	if !spendLimited(key) || len(attempts) == 0 || st == nil {
		return true
	}
	now := time.Now()
	est := s.holdEstimate(key, attempts, endpoint, now)
	release, no := s.spend.hold(key, est)
	for try := 0; no == staleState && try < 3; try++ {
		// A newer state of the key or its customer came after the key was
		// read: read it again (the cache has it).
		k, ok := s.keys.LookupKey(s.customerKey(r))
		if !ok {
			env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"incorrect or revoked API key"))
			return false
		}
		if refuseBlocked(w, env, &k, now) {
			st.uncountRequest()
			return false
		}
		st.key, st.keyAt = k, now
		release, no = s.spend.hold(&st.key, est)
	}
	if no != nil {
		st.uncountRequest() // a spend refusal does not count against rpm_limit
		refuseSpend(w, env, no, now)
		return false
	}
	st.held = &spendHold{release: release}
	return true
}

// uncountRequest takes the request out of its key's requests of the
// minute (requestState.uncount), when it was counted.
func (st *requestState) uncountRequest() {
	if st.uncount != nil {
		st.uncount()
	}
}

// end releases the hold, once, counting the charge of x, the request's
// last attempt, in the day of its event's time (the request's first
// attempt's start), as the ledger counts it.
func (h *spendHold) end(x *exchange) {
	if h != nil && !h.ended {
		h.ended = true
		h.release(x.s.chargeOf(x), x.event.Time)
	}
}

// chargeOf is what the event of x, a request's last attempt, is charged,
// in nano-units (rounded up; spendHolds): 0 when it was not charged or
// cannot be rated here.
func (s *Server) chargeOf(x *exchange) int64 {
	if x == nil || !x.committed || x.event.NotCharged || s.rates == nil {
		return 0
	}
	r, ok := s.rates.Rate(x.event)
	if !ok {
		return 0
	}
	return chargeNanos(r)
}

// runAttempt runs one attempt on its deployment, finishing its exchange
// (its event committed) and then the deployment's part, whatever happens
// (a relay that aborts the handler panics through here).
func (s *Server) runAttempt(x *exchange, p prepared, run func(x *exchange, p prepared)) {
	p.dep.acquire()
	defer func() { s.endAttempt(x, p.dep, p.model) }() // a closure: p's copy in a defer record took a stream's stack past 8 KiB
	defer x.finish()
	run(x, p)
}

// endAttempt moves the health of d, the deployment of x, an attempt for
// model, by how it went, and logs what that changed (logHealth).
//
//go:noinline
func (s *Server) endAttempt(x *exchange, d *deployment, model string) {
	s.logHealth(d, model, x, d.release(x.outcome(), x.retryAfter, s.cfg.Retry))
}

// logHealth logs c, a change in the health of d, made by the end of its
// attempt x for model: at WARN, a rest begun (at most one line a rest, the
// attempts that fail while it rests not logged), with its length, the
// failures in a row and the attempt's error (why); at INFO, a recovery (a
// success after failures). Without them an operator saw a deployment
// lose its traffic (for up to a day, when an upstream's Retry-After asks
// for it) with nothing to say why but the request line of the attempt
// that began the rest.
func (s *Server) logHealth(d *deployment, model string, x *exchange, c change) {
	rid := x.event.RequestID // a retried attempt's event has an id of its own (retire)
	if rid == "" {
		rid = x.event.ID
	}
	s.logChange(d, model, rid, x.event.Error, x.retryAfter, c)
}

// logChange is logHealth's line for a change c of d's health made by the
// request requestID for model, whose attempt failed with why (an error's
// words), the upstream asking for retryAfter.
func (s *Server) logChange(d *deployment, model, requestID, why string, retryAfter time.Duration, c change) {
	if _, table := s.routes.models[model]; !table {
		return // a "provider/model" name outside the table: a deployment of its own per request, no health kept
	}
	switch {
	case c.rested:
		s.log.Warn("gateway: deployment resting", "deployment", d.name, "provider", d.provider.Name, "model", model,
			"rest", c.rest.String(), "failures", c.failures, "retry_after", retryAfter.String(),
			"request_id", requestID, "error", why)
	case c.recovered:
		s.log.Info("gateway: deployment recovered", "deployment", d.name, "provider", d.provider.Name, "model", model,
			"failures", c.failures)
	}
}

// outcome is how the attempt went for its deployment's health: failed
// when the upstream failed it, ok when it served it, else neutral. A
// later attempt cut off at request_timeout, which had only what the
// earlier ones left of it (or nothing, and was never sent), is neutral:
// the time was spent elsewhere.
func (x *exchange) outcome() outcome {
	switch {
	case x.upstreamFailed && x.event.Attempt > 1 && errors.Is(x.cause(), errRequestTimeout):
		return outcomeNeutral
	case x.upstreamFailed:
		return outcomeFailed
	case x.responded && x.event.Status == "ok":
		return outcomeOK
	}
	return outcomeNeutral
}

// newEventID is a fresh event id, a UUIDv7 like the requests' ids.
func newEventID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
