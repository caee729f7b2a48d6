package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readiness is what GET /readyz answers. Each check says what it saw; Ready
// is false (status 503) only when this process cannot do its job:
//
//   - database: "ok" or the error. The admin API and the meter worker need
//     it; the gateway does not (it serves from its key snapshot), so a
//     gateway-only process stays ready while Postgres is down.
//   - nats: "connected" or "disconnected". The meter worker needs it; the
//     gateway spools while it is away, and stays ready.
//   - keys: "loaded" once the gateway holds a key snapshot (not ready
//     before).
//   - spool: its depth and age, and "accepting": false when the gateway
//     refuses new requests (spool full, or older than spool_max_age).
type readiness struct {
	Ready    bool         `json:"ready"`
	Roles    []string     `json:"roles"`
	Database string       `json:"database"`
	NATS     string       `json:"nats,omitempty"`
	Keys     string       `json:"keys,omitempty"`
	Spool    *spoolStatus `json:"spool,omitempty"`
}

type spoolStatus struct {
	Events        int64   `json:"events"`
	Bytes         int64   `json:"bytes"`
	OldestSeconds float64 `json:"oldest_seconds"`
	Accepting     bool    `json:"accepting"`
	Refusal       string  `json:"refusal,omitempty"`
}

func (a *app) readiness(ctx context.Context, r roles) readiness {
	rd := readiness{Ready: true, Database: "ok"}
	for name, on := range map[string]bool{"gateway": r.gateway, "meter": r.meter, "admin": r.admin} {
		if on {
			rd.Roles = append(rd.Roles, name)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := a.store.Ping(pctx); err != nil {
		rd.Database = err.Error()
		rd.Ready = rd.Ready && !(r.admin || r.meter)
	}
	if a.nc != nil {
		rd.NATS = "connected"
		if !a.nc.IsConnected() {
			rd.NATS = "disconnected"
			rd.Ready = rd.Ready && !r.meter
		}
	}
	if a.keys != nil {
		rd.Keys = "loaded"
		if !a.keys.Loaded() {
			rd.Keys, rd.Ready = "not loaded", false
		}
	}
	if a.spool != nil {
		n, b, age := a.spool.Stats()
		rd.Spool = &spoolStatus{Events: n, Bytes: b, OldestSeconds: age.Seconds(), Accepting: true}
		if err := a.sink.Accepting(); err != nil {
			rd.Spool.Accepting, rd.Spool.Refusal, rd.Ready = false, err.Error(), false
		}
	}
	return rd
}

// opsHandler serves, on the admin listener of every role: GET /metrics
// (Prometheus), GET /healthz (alive) and GET /readyz (see readiness), and
// the admin API when this process runs the admin role; with pprof, the
// runtime profiles under /debug/pprof/ (net/http/pprof).
func (a *app) opsHandler(r roles, reg *prometheus.Registry, admin http.Handler, pprof bool) http.Handler {
	mux := chi.NewRouter()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if pprof {
		mux.Mount("/debug/pprof", pprofHandler())
	}
	mux.Get("/readyz", func(w http.ResponseWriter, req *http.Request) {
		rd := a.readiness(req.Context(), r)
		w.Header().Set("Content-Type", "application/json")
		if !rd.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rd)
	})
	if admin != nil {
		mux.Mount("/", admin)
	} else {
		mux.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
		})
	}
	return mux
}

// pprofHandler serves net/http/pprof's index and profiles under
// /debug/pprof/, without the package's registration on
// http.DefaultServeMux.
func pprofHandler() http.Handler {
	mux := chi.NewRouter()
	mux.Get("/", pprof.Index)
	mux.Get("/cmdline", pprof.Cmdline)
	mux.Get("/profile", pprof.Profile)
	mux.Get("/symbol", pprof.Symbol)
	mux.Post("/symbol", pprof.Symbol)
	mux.Get("/trace", pprof.Trace)
	mux.Get("/{name}", func(w http.ResponseWriter, r *http.Request) {
		pprof.Handler(chi.URLParam(r, "name")).ServeHTTP(w, r)
	})
	return mux
}
