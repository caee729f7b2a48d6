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

	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/web"
)

// readiness is what GET /readyz answers: 200 when this process can do its
// job, else 503. A process running the gateway (gateway or serve) is ready
// while it can serve and meter: its key snapshot is loaded and its usage
// events can go to JetStream or, NATS away, to its spool. Postgres and
// NATS are then components whose outage it rides out, shown apart:
//
//   - database: "ok" or the error. The admin API and the meter worker need
//     it; the gateway serves from its key snapshot without it. The check
//     (a Ping, or for the meter and admin roles a look for the ledger's
//     tables, within 1 s) is shared by the requests that come while it
//     runs, and with /metrics' tollgate_database_up (dbCheck).
//   - nats: "connected" or "disconnected". The meter worker needs it; the
//     gateway spools meanwhile.
//   - keys: "loaded" once the gateway holds a key snapshot (not ready
//     before).
//   - spool: its depth and age, "accepting": false when the gateway
//     refuses new requests (spool full, or older than spool_max_age), and
//     "write_error" while its writes fail (the events it could not take
//     wait in the crash journal).
//   - embedded_store_hand_over: while this process hands over the store
//     an embedded JetStream left in its data directory (startHandOver),
//     what it is doing: waiting for NATS and its streams, moving, or
//     failed, with the error and when this process tries again. It does
//     not make the process unready: the events it holds are metered once
//     moved.
//   - dead_letters: while the admin role could not make the dead-letter
//     stream yet (NATS not reachable, or the stream refused: another
//     stream holding its subject, say), why, and that it tries again
//     (retryDeadLetters). Its dead-letter endpoints answer 503
//     meanwhile; the rest of the admin API serves, so the process stays
//     ready, as for the hand-over.
//   - degraded: the roles of this process that cannot work now (say, in
//     serve, "meter" and "admin" while Postgres is down), each with why;
//     "meter" also when its worker cannot set up the usage stream or its
//     consumer, with NATS' words (meter.replicas 3 on a NATS that is not
//     a cluster, say), or when its consumer stops answering (a cluster
//     that lost its quorum), or while its writes to the ledger fail
//     (with Postgres' error and since when). A role degraded for more
//     than one reason has them all, joined by "; ".
//
// Without the gateway, a process is ready when none of its roles is
// degraded.
type readiness struct {
	Ready    bool         `json:"ready"`
	Roles    []string     `json:"roles"`
	Database string       `json:"database"`
	NATS     string       `json:"nats,omitempty"`
	Keys     string       `json:"keys,omitempty"`
	Spool    *spoolStatus `json:"spool,omitempty"`
	// Journal is "ok", or the crash journal's write error while it fails.
	Journal string `json:"journal,omitempty"`
	// HandOver is what the embedded store's hand-over is doing, while it
	// has not ended (see startHandOver).
	HandOver string `json:"embedded_store_hand_over,omitempty"`
	// DeadLetters is why the admin API's dead-letter routes are not
	// available yet, while they are not (see retryDeadLetters).
	DeadLetters string            `json:"dead_letters,omitempty"`
	Degraded    map[string]string `json:"degraded,omitempty"`
}

type spoolStatus struct {
	Events        int64   `json:"events"`
	Bytes         int64   `json:"bytes"`
	OldestSeconds float64 `json:"oldest_seconds"`
	Accepting     bool    `json:"accepting"`
	Refusal       string  `json:"refusal,omitempty"`
	// WriteError is the spool's write error while its writes fail (a
	// full disk): the events it could not take wait in the crash journal.
	WriteError string `json:"write_error,omitempty"`
}

// degrade records why role cannot work now, after the reasons found
// before it.
func (rd *readiness) degrade(role, why string) {
	if prev := rd.Degraded[role]; prev != "" {
		why = prev + "; " + why
	}
	rd.Degraded[role] = why
}

func (a *app) readiness(ctx context.Context, r roles) readiness {
	rd := readiness{Database: "ok", Degraded: map[string]string{}}
	for _, role := range []struct {
		name string
		on   bool
	}{{"gateway", r.gateway}, {"meter", r.meter}, {"admin", r.admin}} {
		if role.on {
			rd.Roles = append(rd.Roles, role.name)
		}
	}
	if err := a.db.run(ctx); err != nil {
		rd.Database = err.Error()
		if r.meter {
			rd.degrade("meter", "the database is unreachable or holds no ledger: events wait in JetStream")
		}
		if r.admin {
			rd.degrade("admin", "the database is unreachable or holds no ledger")
		}
	}
	if a.nc != nil {
		rd.NATS = "connected"
		if !a.nc.IsConnected() {
			rd.NATS = "disconnected"
			if r.meter {
				rd.degrade("meter", "NATS is unreachable")
			}
		}
	}
	if why := a.meterDown(); r.meter && why != "" {
		rd.degrade("meter", why)
	}
	gatewayReady := true
	if a.keys != nil {
		rd.Keys = "loaded"
		if !a.keys.Loaded() {
			rd.Keys, gatewayReady = "not loaded", false
			rd.degrade("gateway", "the key buckets are not loaded yet")
		}
	}
	if a.spool != nil {
		n, b, age := a.spool.Stats()
		rd.Spool = &spoolStatus{Events: n, Bytes: b, OldestSeconds: age.Seconds(), Accepting: true}
		if err := a.spool.WriteError(); err != nil {
			rd.Spool.WriteError = err.Error()
		}
		if err := a.sink.Accepting(); err != nil {
			rd.Spool.Accepting, rd.Spool.Refusal, gatewayReady = false, err.Error(), false
			rd.degrade("gateway", "its usage spool refuses more events: "+err.Error())
		}
	}
	if a.journal != nil {
		rd.Journal = "ok"
		if err := a.journal.Failing(); err != nil {
			rd.Journal, gatewayReady = err.Error(), false
			rd.degrade("gateway", "its crash journal cannot write (a full disk?): new requests are refused with 503 until it can")
		}
	}
	if h := a.handOverState.Load(); h != nil {
		rd.HandOver = *h
	}
	if d := a.dlqState.Load(); d != nil {
		rd.DeadLetters = *d
	}
	if r.gateway {
		rd.Ready = gatewayReady
	} else {
		rd.Ready = len(rd.Degraded) == 0
	}
	return rd
}

// meterDown says why the meter worker does not run, or "" when it does
// (or NATS is disconnected, which readiness says as such): JetStream
// refuses the usage stream or its consumer as configured, with the
// server's words, or the worker's set-up fails otherwise; or, while it
// runs, why its writes to the ledger fail (Postgres out of reach, a table
// gone after a rollback).
func (a *app) meterDown() string {
	if a.worker == nil || a.nc != nil && !a.nc.IsConnected() {
		return ""
	}
	st := a.worker.Status()
	switch since := st.Since.UTC().Format(time.RFC3339); {
	case st.Err == nil && st.WriteErr != nil:
		return "the meter worker's writes to the ledger fail (since " + st.WriteSince.UTC().Format(time.RFC3339) + "): " +
			st.WriteErr.Error() + "; it retries them, and the events wait in JetStream"
	case st.Err == nil:
		return ""
	case st.Stalled:
		return "the meter worker's consumer does not answer (since " + since + "): " + st.Err.Error() +
			"; JetStream has no leader for it (a cluster without a quorum?), and events wait in JetStream or the gateways' spools"
	case st.Refused:
		return "NATS refuses the usage stream or its consumer as configured (since " + since + "): " + st.Err.Error() +
			"; nothing is written to the ledger until that is fixed, and events wait in JetStream or the gateways' spools"
	default:
		return "the meter worker cannot set up its consumer (since " + since + "): " + st.Err.Error()
	}
}

// metricsInFlight is how many /metrics scrapes are answered at once; more
// are refused with 503 (promhttp's MaxRequestsInFlight). Prometheus
// scrapes one at a time per server, so a few HA pairs and an operator's
// curl fit.
const metricsInFlight = 4

// opsHandler serves, on the admin listener of every role: GET /metrics
// (Prometheus), GET /healthz (alive) and GET /readyz (see readiness), and
// the admin API and the console (/console/) when this process runs the admin role; with pprof, the
// runtime profiles under /debug/pprof/ (net/http/pprof). With the admin role, trusted tells the
// requests with the operators' credentials (for api.Listener.SetTrusted); nil without it.
func (a *app) opsHandler(r roles, reg *prometheus.Registry, adm *api.Admin, pprof bool) (_ http.Handler, trusted func(*http.Request) bool) {
	mux := chi.NewRouter()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, MaxRequestsInFlight: metricsInFlight}))
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
	if adm != nil {
		// The operators' console, over the admin API (GET / redirects to it).
		admin := adm.Handler()
		console := web.NewConsole(admin, 30*time.Second, a.log)
		console.Routes(mux)
		a.started("console", 5*time.Second, func(context.Context) error { console.Close(); return nil })
		mux.Mount("/", admin)
		// A method chi does not know is answered by this router before any
		// route: the admin API answers it (405, its JSON error), not chi
		// (a bare 405 with no body).
		mux.MethodNotAllowed(admin.ServeHTTP)
		// The bodies read ahead are the operators': the admin token's, a
		// console session's.
		trusted = func(req *http.Request) bool { return adm.Authorized(req) || console.SignedIn(req) }
	} else {
		mux.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
		})
	}
	return mux, trusted
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
