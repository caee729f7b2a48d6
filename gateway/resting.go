package gateway

import "github.com/prometheus/client_golang/prometheus"

// restingCollector exposes tollgate_gateway_deployment_resting{provider,
// deployment}: 1 while a deployment of the model table cools down after a
// failure (it is tried only once no other deployment of its model or its
// fallbacks is available), 0 otherwise. Its labels are the config's
// provider and deployment names, never a client's: a "provider/model"
// route outside the table has no series. Deployments of several models
// under one name are one series, resting when any of them is.
type restingCollector struct {
	desc *prometheus.Desc
	deps []*deployment
}

// registerResting registers the collector of the table's deployments, in
// the config's order, with reg.
func (s *Server) registerResting(reg prometheus.Registerer) {
	c := restingCollector{desc: prometheus.NewDesc("tollgate_gateway_deployment_resting",
		"1 while a deployment cools down after a failure (a connect error, 401, 402, 408, 429, 5xx, a broken stream): its model's requests go to its other deployments and fallbacks first; 0 otherwise.",
		[]string{"provider", "deployment"}, nil)}
	for _, m := range s.cfg.Models {
		c.deps = append(c.deps, s.routes.models[m.Name].deployments...)
	}
	reg.MustRegister(c)
}

// Describe implements prometheus.Collector.
func (c restingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c restingCollector) Collect(ch chan<- prometheus.Metric) {
	type series struct{ provider, name string }
	resting := map[series]bool{}
	var order []series
	for _, d := range c.deps {
		k := series{d.provider.Name, d.name}
		was, seen := resting[k]
		if !seen {
			order = append(order, k)
		}
		resting[k] = was || d.now().Before(d.availableAt())
	}
	for _, k := range order {
		v := 0.0
		if resting[k] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, k.provider, k.name)
	}
}
