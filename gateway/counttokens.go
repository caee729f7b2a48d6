package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// countTokens serves a provider's token-counting endpoint c: routed to the
// model's deployments that the provider serves, in the order requests
// would go (within retry.max_attempts and retry.budget), relayed as the
// first one answers (status, body scrubbed of the provider's credentials,
// backoff headers), and not metered: providers do not bill counting. What
// a request's attempt takes as the deployment's failure (countCall: an
// upstream unreachable, or silent past its bounds, a non-streamed
// request's (countBounds), a 3xx, a 2xx but 200, a web page or a
// provider's error under a 200, the deployment's key or account refused,
// its model or URL not found, a 408, 429 or 5xx) goes
// to the next deployment, and rests the failed one; on the last, the
// client gets what a request would (502 or 504, or the 408, 429 or 5xx
// as it came), and no event.
func (s *Server) countTokens(p *provider.Provider, c provider.Counter, env provider.Envelope) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		call, _, ok := s.readCall(w, r, env, c.Read)
		if !ok {
			return
		}
		rt, err := s.routes.resolve(call.Model)
		key := keyOf(r)
		var plan, served []attempt
		var ready int
		if err == nil {
			served, _ = s.routes.plan(rt, func(_ string, d *deployment) bool { return d.provider.Type == p.Type })
			plan, ready = s.routes.plan(rt, func(model string, d *deployment) bool {
				return d.provider.Type == p.Type && allowedModel(key, model, deploymentRoute(model, d))
			})
		}
		switch {
		case len(served) == 0:
			env.WriteError(w, provider.Err(http.StatusNotFound, "invalid_request_error", "model_not_found",
				fmt.Sprintf("the model %q is not served by a provider of type %s here", call.Model, p.Type)))
			return
		case len(plan) == 0: // served, but not to this key: as the other routes answer it
			env.WriteError(w, modelNotAllowed(call.Model))
			return
		}
		plan = bounded(plan, ready, s.cfg.Retry.MaxAttempts)
		run := countRun{call: call, env: env, rid: requestIDOf(r), arrived: time.Now()}
		until := run.arrived.Add(s.cfg.Retry.Budget)
		for i, a := range plan {
			last := i+1 == len(plan) || !time.Now().Before(until) || r.Context().Err() != nil
			if s.countAt(w, r, &run, a, i == 0, last) {
				return
			}
			if s.metrics != nil {
				s.metrics.retries.WithLabelValues(a.dep.provider.Name, a.dep.name).Inc()
			}
		}
	}
}

// countRun is a token count's request: its call, the envelope its errors
// are answered in, its id (X-Request-Id), and when it arrived, from which
// request_timeout counts for each attempt, as for a request's.
type countRun struct {
	call    provider.Call
	env     provider.Envelope
	rid     string
	arrived time.Time
}

// countAt sends run's count call to the deployment of a and answers the
// client with what came, as a request's attempt is answered (countCall),
// unless the deployment failed and another attempt may follow (last is
// false): then it answers nothing and reports false. Either way such a
// failure rests the deployment, as a failed attempt of a request does,
// and a count served ends its run of failures, as a request's success
// does (countAnswer.outcome). A client gone before the answer moves no
// deployment's health. A count cut off at request_timeout is answered
// 504, with no attempt after it, and, unless it was the first (a later
// one had only what the others left of it), rests nothing.
func (s *Server) countAt(w http.ResponseWriter, r *http.Request, run *countRun, a attempt, first, last bool) bool {
	d := a.dep
	path, upBody, err := run.call.Upstream(d.upstream)
	if err != nil {
		run.env.WriteError(w, badRequest(err.Error()))
		return true
	}
	c := s.countCall(r.Context(), a, run.arrived, path, upBody, run.call.Header, run.rid, customerOf(keyOf(r)))
	if r.Context().Err() != nil {
		return true // no one to answer, and nothing the deployment did
	}
	o := c.outcome()
	if c.timeUp && !first {
		o = outcomeNeutral
	}
	s.logChange(d, a.model, run.rid, c.why, c.wait, d.counted(o, c.wait, s.cfg.Retry))
	if c.why != "" && !last && !c.timeUp {
		return false
	}
	if c.err != nil {
		if c.err.Status == c.status { // the upstream's refusal, wrapped: with its backoff headers
			passHeaders(w.Header(), c.header)
		}
		run.env.WriteError(w, *c.err)
		return true
	}
	h := w.Header()
	h.Set("Content-Type", answerType(c.header.Get("Content-Type"), "application/json"))
	passHeaders(h, c.header)
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body)
	return true
}

// countAnswer is what one deployment answered a token count (countCall):
// the answer to relay (status, header, body scrubbed of the provider's
// credentials), or err, what the client is told instead. why, when not
// "", is how the deployment failed, in a request's event's words, and
// wait the backoff it asked for; timeUp, that it was cut off at
// request_timeout.
type countAnswer struct {
	status int
	header http.Header
	body   []byte
	err    *provider.Error
	why    string
	wait   time.Duration
	timeUp bool
}

// outcome is how the count went for its deployment's health, as a
// request's attempt (exchange.outcome): failed when why says so, ok when
// the deployment served it (a 200 that is the count, no error object),
// else neutral (the client's own refusal, a client gone).
func (c countAnswer) outcome() outcome {
	switch {
	case c.why != "":
		return outcomeFailed
	case c.status == http.StatusOK && c.err == nil:
		if _, refused := errorObject(c.body); !refused {
			return outcomeOK
		}
	}
	return outcomeNeutral
}

// countCall sends a count's upstream body, with header, to path below
// a's deployment under parent, and reads what came as a request's attempt
// is read, bounded as a non-streamed request's (countBounds): unreachable,
// the deployment's failure, 502; no headers within connect_timeout (or
// stall_timeout, if longer: a count's headers come with its whole
// answer), a body silent for stall_timeout, or either past
// request_timeout from arrived, 504; an answer countFailure reads as the
// deployment's failure. rid and customer name the count in the log line
// of a redirect.
func (s *Server) countCall(parent context.Context, a attempt, arrived time.Time, path string, body []byte, header http.Header, rid, customer string) countAnswer {
	pc := a.dep.provider
	ctx, cancel := context.WithDeadlineCause(parent, arrived.Add(pc.RequestTimeout), errRequestTimeout)
	defer cancel()
	ctx, b := countBounds(ctx, pc)
	defer b.stop()
	lost := func(err error, what string) countAnswer { // no answer: what says why, err what failed
		status, msg := http.StatusBadGateway, what+upstreamErrorText(err)
		cause := context.Cause(ctx)
		if timedOut(cause) {
			status, msg = http.StatusGatewayTimeout, cause.Error()
		}
		msg = s.scrubFor(pc.Name, msg)
		e := upstreamFailure(status, msg)
		return countAnswer{err: &e, why: msg, timeUp: errors.Is(cause, errRequestTimeout)}
	}
	if err := ctx.Err(); err != nil {
		return lost(err, "") // nothing left of request_timeout: not sent
	}
	up, err := s.upstreamRequest(ctx, pc, path, body, header)
	if err != nil {
		return lost(err, "")
	}
	resp, err := s.clientFor(pc).RoundTrip(up) // no redirect followed: see redirected
	if err != nil {
		return lost(err, "the upstream could not be reached: ")
	}
	defer resp.Body.Close()
	b.answered()
	var out []byte
	if resp.StatusCode >= 200 { // a 101's body may be the connection itself
		if out, err = io.ReadAll(io.LimitReader(b.reader(resp.Body), 1<<20)); err != nil {
			return lost(err, "reading the upstream's answer: ")
		}
	}
	out = []byte(s.scrubFor(pc.Name, string(out)))
	s.redirected(pc.Name, rid, customer, resp) // logs a redirect's Location
	c := countAnswer{status: resp.StatusCode, header: resp.Header, body: out}
	if c.why, c.err = s.countFailure(a.route(), resp, out); c.why != "" {
		c.wait = retryAfter(resp.Header, time.Now())
	}
	return c
}

// countFailure reads a count's answer resp, its body out, routed as rt,
// as a request's answer is read: a 200 that is a web page (pageKind) or a
// provider's error object (serverSide), or another status that refusalOf
// reads as the deployment's failure (a 3xx, a 2xx but 200, the
// deployment's key or account refused, its model or URL not found, a 408,
// 429 or 5xx). Each is the deployment's failure: why says it (as a
// request's event would), e what the client is told on the last attempt
// (nil: the answer as it came, as a request relays a 429, a 5xx or an
// error under a 200). Anything else ("", nil) is relayed. A refusal
// relayed, the deployment's or the client's, whose body is no JSON error
// object (an nginx HTML 503, a text/plain 400) is e, wrappedRefusal: in
// the route's envelope, as a request's is.
func (s *Server) countFailure(rt route, resp *http.Response, out []byte) (why string, e *provider.Error) {
	if resp.StatusCode == http.StatusOK {
		if what := pageKind(resp.Header.Get("Content-Type"), out); what != "" {
			page := upstreamFailure(http.StatusBadGateway, pageMessage(what))
			return pageMessage(what), &page
		}
		if serverSide(out) {
			return "upstream answered 200 with an error of the provider's side", nil
		}
		return "", nil
	}
	f := s.refusalOf(rt, resp.StatusCode, out)
	if f.failed {
		why = fmt.Sprintf("upstream status %d", resp.StatusCode) + f.why
	}
	if f.answer != "" {
		refused := provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", f.answer)
		return why, &refused
	}
	if _, ok := errorObject(out); !ok {
		wrapped := wrappedRefusal(resp.StatusCode, out)
		return why, &wrapped
	}
	return why, nil
}
