package gateway

import (
	"errors"
	"strings"
)

var errNoRoute = errors.New("no route")

// route is where a requested model goes: its deployments, in the order of
// the config, and the models it falls back to.
type route struct {
	// model is the canonical model name events are recorded and priced under.
	model string
	// provider and upstream are the first deployment's (one attempt's
	// route has only its own deployment).
	provider *ProviderConfig
	upstream string
	// deployments are where the model is served; fallbacks the models of
	// the table tried after them.
	deployments []*deployment
	fallbacks   []string
}

// router resolves model names: first the config's model table, then a
// "provider/model" prefix naming a configured provider.
type router struct {
	models map[string]route
	// named are the table's deployments by "provider/upstream model": the
	// route of the first model of the table (in the config's order) with
	// that deployment, so that such a name always resolves the same.
	named     map[string]route
	providers map[string]*ProviderConfig
	retry     RetryConfig
}

func newRouter(cfg Config) *router {
	r := &router{models: map[string]route{}, named: map[string]route{}, providers: map[string]*ProviderConfig{}, retry: cfg.Retry}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		p.scrub = newScrubber(p)
		r.providers[p.Name] = p
	}
	for _, m := range cfg.Models {
		rt := route{model: m.Name, fallbacks: m.Fallbacks}
		for _, d := range m.Deployments {
			rt.deployments = append(rt.deployments, newDeployment(d, r.providers[d.Provider]))
		}
		rt.provider, rt.upstream = rt.deployments[0].provider, rt.deployments[0].upstream
		r.models[m.Name] = rt
		for _, d := range rt.deployments {
			if name := d.provider.Name + "/" + d.upstream; r.named[name].deployments == nil {
				r.named[name] = deploymentRoute(m.Name, d)
			}
		}
	}
	return r
}

// resolve returns the route for a requested model name, or errNoRoute.
// "provider/model" that names a deployment of the table is recorded under
// the name of the first model of the table (in the config's order) with
// that deployment, so that it is priced the same, and goes to that
// deployment alone.
func (r *router) resolve(name string) (route, error) {
	if rt, ok := r.models[name]; ok {
		return rt, nil
	}
	if rt, ok := r.named[name]; ok {
		return rt, nil
	}
	prov, upstream, ok := strings.Cut(name, "/")
	p := r.providers[prov]
	if !ok || p == nil || upstream == "" || p.PrefixRoutes == PrefixNone {
		return route{}, errNoRoute
	}
	d := newDeployment(DeploymentConfig{Name: name, Provider: prov, UpstreamModel: upstream, Weight: 1}, p)
	return route{model: name, provider: p, upstream: upstream, deployments: []*deployment{d}}, nil
}

// attempt is one upstream attempt a request may make: a deployment of a
// model (the asked one or a fallback).
type attempt struct {
	model string
	dep   *deployment
}

// route is the single-deployment route of a.
func (a attempt) route() route { return deploymentRoute(a.model, a.dep) }

// plan orders the attempts of a request for rt: the model's deployments
// that are available (not cooling down, under their limits) in an order
// drawn by weight, then each fallback model's the same way (in the order
// of fallbacks, each model once), then the unavailable ones of all of
// them, soonest available first, so that a request is refused by an
// upstream rather than by the gateway's guess. It returns the attempts
// and how many of them, first, do not rest (available, or only at their
// max_concurrent or rpm_limit, those after the available): the others
// rest after failures (bounded takes one of them). ok, when not nil,
// keeps only the deployments it accepts (a native route serves its
// provider type only).
func (r *router) plan(rt route, ok func(model string, d *deployment) bool) (plan []attempt, ready int) {
	if len(rt.deployments) == 1 && len(rt.fallbacks) == 0 { // the common case, without the bookkeeping
		if d := rt.deployments[0]; ok == nil || ok(rt.model, d) {
			return []attempt{{model: rt.model, dep: d}}, 1 // alone, it is tried whether it rests or not
		}
		return nil, 0
	}
	var available, busy, resting []attempt
	seen := map[string]bool{}
	var add func(rt route)
	add = func(rt route) {
		if seen[rt.model] {
			return
		}
		seen[rt.model] = true
		var cands []*deployment
		for _, d := range rt.deployments {
			if ok == nil || ok(rt.model, d) {
				cands = append(cands, d)
			}
		}
		for _, d := range weightedOrder(cands) {
			switch {
			case d.available():
				available = append(available, attempt{model: rt.model, dep: d})
			case !d.resting():
				// At its max_concurrent or rpm_limit only: it asked for
				// no pause, and is tried as the available are, after them.
				busy = append(busy, attempt{model: rt.model, dep: d})
			default:
				resting = append(resting, attempt{model: rt.model, dep: d})
			}
		}
		for _, f := range rt.fallbacks {
			if frt, found := r.models[f]; found {
				add(frt)
			}
		}
	}
	add(rt)
	sortByRest(resting)
	ready = len(available) + len(busy)
	return append(append(available, busy...), resting...), ready
}

// bounded returns the attempts a request makes of plan, whose first ready
// do not rest (router.plan): at most max, of which at most one to a
// resting deployment, the one whose rest ends soonest. A provider that
// asked for a pause gets one call a request, not max_attempts, when every
// deployment rests.
func bounded(plan []attempt, ready, max int) []attempt {
	return plan[:min(len(plan), ready+1, max)]
}

// serves reports whether a deployment of rt is of provider type typ.
func (rt route) serves(typ string) bool {
	for _, d := range rt.deployments {
		if d.provider.Type == typ {
			return true
		}
	}
	return false
}

// deploymentRoute is the route of model on deployment d alone.
func deploymentRoute(model string, d *deployment) route {
	return route{model: model, provider: d.provider, upstream: d.upstream, deployments: []*deployment{d}}
}
