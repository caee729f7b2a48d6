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
// backoff headers), and not metered: providers do not bill counting. An
// answer that is the deployment's failure by the checks every request's
// answer goes through before its relay (countFailure: a web page, the
// 404 of its model or URL not found) goes to the next deployment, and
// rests the failed one; on the last, the client gets 502. Other failures
// (unreachable, 401, 429, 5xx) are answered as they come, no other
// deployment tried.
func (s *Server) countTokens(p *provider.Provider, c provider.Counter, env provider.Envelope) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readRequest(w, r, env)
		if !ok {
			return
		}
		call, err := c.Read(r, body)
		if err == nil {
			err = checkModel(call.Model)
		}
		if err != nil {
			var pe provider.Error
			if !errors.As(err, &pe) {
				pe = badRequest(err.Error())
			}
			env.WriteError(w, pe)
			return
		}
		rt, err := s.routes.resolve(call.Model)
		key := keyOf(r)
		var plan, served []attempt
		if err == nil {
			served = s.routes.plan(rt, func(_ string, d *deployment) bool { return d.provider.Type == p.Type })
			plan = s.routes.plan(rt, func(model string, d *deployment) bool {
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
		if len(plan) > s.cfg.Retry.MaxAttempts {
			plan = plan[:s.cfg.Retry.MaxAttempts]
		}
		until, rid := time.Now().Add(s.cfg.Retry.Budget), requestIDOf(r)
		for i, a := range plan {
			last := i+1 == len(plan) || !time.Now().Before(until) || r.Context().Err() != nil
			if s.countAt(w, r, call, a, env, rid, last) {
				return
			}
			if s.metrics != nil {
				s.metrics.retries.WithLabelValues(a.dep.provider.Name, a.dep.name).Inc()
			}
		}
	}
}

// countAt sends the count call to the deployment of a and answers the
// client in env with what came, unless the deployment failed in a way
// countFailure reads and another attempt may follow (last is false):
// then it answers nothing and reports false. Either way such a failure
// rests the deployment, as a failed attempt of a request does.
func (s *Server) countAt(w http.ResponseWriter, r *http.Request, call provider.Call, a attempt, env provider.Envelope, rid string, last bool) bool {
	d := a.dep
	path, upBody, err := call.Upstream(d.upstream)
	if err != nil {
		env.WriteError(w, badRequest(err.Error()))
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), d.provider.ConnectTimeout)
	defer cancel()
	up, err := s.upstreamRequest(ctx, d.provider, path, upBody, call.Header)
	if err != nil {
		env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", err.Error()))
		return true
	}
	resp, err := s.clientFor(d.provider).RoundTrip(up) // no redirect followed: see redirected
	if err != nil {
		env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error",
			"the upstream could not be reached: "+s.scrubFor(d.provider.Name, unwrapURL(err))))
		return true
	}
	defer resp.Body.Close()
	if s.redirected(d.provider.Name, rid, customerOf(keyOf(r)), resp) {
		env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", redirectMessage(resp.StatusCode)))
		return true
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error",
			"reading the upstream's answer: "+s.scrubFor(d.provider.Name, err.Error())))
		return true
	}
	out = []byte(s.scrubFor(d.provider.Name, string(out)))
	if why, msg := s.countFailure(a.route(), resp, out); why != "" {
		wait := retryAfter(resp.Header, time.Now())
		s.logChange(d, a.model, rid, why, wait, d.failed(wait, s.cfg.Retry))
		if !last {
			return false
		}
		env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", msg))
		return true
	}
	h := w.Header()
	h.Set("Content-Type", answerType(resp.Header.Get("Content-Type"), "application/json"))
	passHeaders(h, resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
	return true
}

// countFailure reads a count's answer resp, its body out, routed as rt,
// with the checks a request's answer goes through before its relay: a
// 200 that is a web page (pageKind), a 404 saying the deployment's model
// (deploymentModelGone) or URL (deploymentURLGone) was not found. Each is
// the deployment's failure: why says it (as a request's event would),
// msg what the client is told of it. Anything else ("", "") is relayed.
func (s *Server) countFailure(rt route, resp *http.Response, out []byte) (why, msg string) {
	switch {
	case resp.StatusCode == http.StatusOK:
		if what := pageKind(resp.Header.Get("Content-Type"), out); what != "" {
			return pageMessage(what), pageMessage(what)
		}
	case resp.StatusCode == http.StatusNotFound && s.deploymentModelGone(rt, out):
		return "upstream status 404: the deployment's model was not found", modelGoneMessage(rt.model)
	case resp.StatusCode == http.StatusNotFound && s.deploymentURLGone(rt, out):
		return "upstream status 404: the deployment's URL was not found", urlGoneMessage(rt.model)
	}
	return "", ""
}
