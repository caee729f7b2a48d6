package gateway

import (
	"errors"
	"strings"
)

var errNoRoute = errors.New("no route")

// route is where a requested model goes.
type route struct {
	// model is the canonical model name events are recorded and priced under.
	model    string
	provider *ProviderConfig
	upstream string
}

// router resolves model names: first the config's model table, then a
// "provider/model" prefix naming a configured provider.
type router struct {
	models    map[string]route
	providers map[string]*ProviderConfig
}

func newRouter(cfg Config) *router {
	r := &router{models: map[string]route{}, providers: map[string]*ProviderConfig{}}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		p.scrub = newScrubber(p)
		r.providers[p.Name] = p
	}
	for _, m := range cfg.Models {
		r.models[m.Name] = route{model: m.Name, provider: r.providers[m.Provider], upstream: m.UpstreamModel}
	}
	return r
}

// resolve returns the route for a requested model name, or errNoRoute.
// "provider/model" that names a model of the table is recorded under the
// table's name, so that it is priced the same.
func (r *router) resolve(name string) (route, error) {
	if rt, ok := r.models[name]; ok {
		return rt, nil
	}
	prov, upstream, ok := strings.Cut(name, "/")
	p := r.providers[prov]
	if !ok || p == nil || upstream == "" {
		return route{}, errNoRoute
	}
	for _, rt := range r.models {
		if rt.provider == p && rt.upstream == upstream {
			return rt, nil
		}
	}
	return route{model: name, provider: p, upstream: upstream}, nil
}
