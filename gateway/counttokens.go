package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// countTokens serves a provider's token-counting endpoint c: routed to the
// first deployment of the model that the provider serves (in the order
// requests would go), relayed as the upstream answers (status, body
// scrubbed of the provider's credentials, backoff headers), and not
// metered: providers do not bill counting.
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
		d := plan[0].dep
		path, upBody, err := call.Upstream(d.upstream)
		if err != nil {
			env.WriteError(w, badRequest(err.Error()))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), d.provider.ConnectTimeout)
		defer cancel()
		up, err := s.upstreamRequest(ctx, d.provider, path, upBody, call.Header)
		if err != nil {
			env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", err.Error()))
			return
		}
		resp, err := s.clientFor(d.provider).RoundTrip(up) // no redirect followed: see redirected
		if err != nil {
			env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error",
				"the upstream could not be reached: "+s.scrubFor(d.provider.Name, unwrapURL(err))))
			return
		}
		defer resp.Body.Close()
		if s.redirected(d.provider.Name, requestIDOf(r), customerOf(key), resp) {
			env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", redirectMessage(resp.StatusCode)))
			return
		}
		out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			env.WriteError(w, provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error",
				"reading the upstream's answer: "+s.scrubFor(d.provider.Name, err.Error())))
			return
		}
		h := w.Header()
		h.Set("Content-Type", answerType(resp.Header.Get("Content-Type"), "application/json"))
		passHeaders(h, resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write([]byte(s.scrubFor(d.provider.Name, string(out))))
	}
}
