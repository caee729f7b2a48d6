package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter"
)

// roles selects what a process runs.
type roles struct{ gateway, meter, admin bool }

func (r roles) all() bool { return r.gateway && r.meter && r.admin }

// app is a running set of roles, wired together. Tests build one with start
// and stop it with close.
type app struct {
	log       *slog.Logger
	store     *ledger.Store
	ns        *server.Server // embedded JetStream, when no NATS URL is set
	nc        *nats.Conn
	gw        *gateway.Server
	keys      *ledger.KeySet
	spool     *meter.Spool
	dlq       *meter.DLQ
	streamCfg meter.StreamConfig
	grace     time.Duration
	sink      *meter.DurablePublisher
	listeners []*http.Server
	group     *errgroup.Group
	cancel    context.CancelFunc
	// Addr and AdminAddr are the bound listen addresses.
	Addr, AdminAddr string
}

func runRoles(ctx context.Context, log *slog.Logger, args []string, r roles) error {
	path, err := configFlag("tollgate", args, r.gateway)
	if err != nil {
		return err
	}
	cfg := &fileConfig{}
	if path != "" {
		if cfg, err = loadConfig(path); err != nil {
			return err
		}
	} else if err := cfg.Meter.Validate(); err != nil {
		return err
	}
	a, err := start(ctx, log, loadEnv(), cfg, r)
	if err != nil {
		return err
	}
	log.Info("tollgate running", "listen", a.Addr, "admin_listen", a.AdminAddr)
	<-ctx.Done()
	log.Info("shutting down: finishing in-flight requests", "grace", a.grace.String())
	return a.close()
}

// start opens the ledger, applies migrations when the process owns the
// whole stack, connects to (or embeds) JetStream and starts the roles'
// listeners and workers. It returns once every listener is bound.
func start(ctx context.Context, log *slog.Logger, e env, cfg *fileConfig, r roles) (_ *app, err error) {
	a := &app{log: log, grace: e.ShutdownGrace}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if a.store, err = ledger.Open(ctx, e.DatabaseURL); err != nil {
		return nil, err
	}
	if r.all() {
		n, err := a.store.Migrate(ctx)
		if err != nil {
			return nil, err
		}
		log.Info("migrations applied", "count", n)
	}
	if err := cfg.Meter.Validate(); err != nil {
		return nil, err
	}
	mc := cfg.Meter
	a.streamCfg = mc.Stream()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mm := newMeterMetrics(reg)
	a.store.SetObserver(newLedgerMetrics(reg))
	for _, p := range cfg.Prices {
		if _, err := a.store.EnsurePrice(ctx, p); err != nil {
			return nil, fmt.Errorf("seed price %s: %w", p.Model, err)
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	a.group, runCtx = errgroup.WithContext(runCtx)

	var js jetstream.JetStream
	if r.gateway || r.meter {
		if js, err = a.connectNATS(e, r); err != nil {
			return nil, err
		}
		// NATS may be down: the gateway then spools, and the worker waits.
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := meter.EnsureStream(sctx, js, mc.Stream()); err != nil {
			log.Warn("usage stream not reachable yet; events are spooled until it is", "err", err)
		} else if a.dlq, err = meter.EnsureDLQ(sctx, js, mc.Stream()); err != nil {
			log.Warn("dead-letter stream not reachable yet", "err", err)
		}
		scancel()
	}
	if r.meter {
		wc := mc.Worker()
		wc.Logger, wc.Observer = log, mm
		a.group.Go(func() error { return runWorker(runCtx, js, a.store, wc, log) })
	}
	if r.gateway {
		a.keys = a.store.NewKeySet(log)
		if err := a.keys.Refresh(ctx); err != nil {
			return nil, err
		}
		go a.keys.Run(runCtx, time.Second)
		if a.spool, err = meter.OpenSpool(filepath.Join(e.DataDir, "spool"), mc.SpoolMaxBytes); err != nil {
			return nil, err
		}
		if n, _, _ := a.spool.Stats(); n > 0 {
			log.Warn("spool: usage events left by an earlier run will be republished", "events", n)
		}
		pub := meter.NewPublisher(js, mc.Stream(), mc.PublishTimeout)
		go a.spool.Republish(runCtx, pub, time.Second, log)
		mm.collectSpool(a.spool)
		a.sink = meter.NewDurablePublisher(pub, a.spool, a.nc.IsConnected, mc.SpoolMaxAge, log, mm)
		if a.gw, err = gateway.New(cfg.Config, a.keys, a.sink, log, gateway.WithMetrics(reg)); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		llm := chi.NewRouter()
		api.NewSelf(a.store, a.keys, log).Routes(llm)
		llm.Mount("/", a.gw.Handler())
		if a.Addr, err = a.listen(e.Listen, llm); err != nil {
			return nil, err
		}
	}
	var adminAPI http.Handler
	if r.admin {
		adm, err := api.NewAdmin(a.store, e.AdminToken, log)
		if err != nil {
			return nil, err
		}
		if a.dlq == nil && !r.gateway && !r.meter && e.NATSURL != "" {
			// The admin role alone reaches the dead-letter stream when it
			// is given NATS.
			if js, err := a.connectNATS(e, r); err == nil {
				dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
				a.dlq, _ = meter.EnsureDLQ(dctx, js, mc.Stream())
				dcancel()
			}
		}
		if a.dlq != nil {
			adm.SetDeadLetters(a.dlq)
		}
		adminAPI = adm.Handler()
	}
	if a.AdminAddr, err = a.listen(e.AdminListen, a.opsHandler(r, reg, adminAPI, e.Pprof)); err != nil {
		return nil, err
	}
	return a, nil
}

// migrate applies every pending migration or, with --down-to N, rolls
// back to version N (an upgrade's undo; read the release's migrations first).
func migrate(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	downTo := fs.Int64("down-to", -1, "roll back to this migration version (0 removes every table)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := ledger.Open(ctx, loadEnv().DatabaseURL)
	if err != nil {
		return err
	}
	defer s.Close()
	if *downTo >= 0 {
		if err := s.MigrateDown(ctx, *downTo); err != nil {
			return err
		}
		log.Info("migrations rolled back", "to_version", *downTo)
		return nil
	}
	n, err := s.Migrate(ctx)
	if err != nil {
		return err
	}
	log.Info("migrations applied", "count", n)
	return nil
}
