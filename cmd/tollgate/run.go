package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/dashboards/metrics"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/keys"
)

// runRoles is the server command name (serve, gateway, meter or admin):
// it reads its flags and the environment, starts roles r, and stops them
// when ctx is done.
func runRoles(ctx context.Context, log *slog.Logger, name string, args []string, stdout io.Writer, r roles) error {
	path, err := configFlag(name, args, r.gateway, stdout)
	if err != nil {
		return err
	}
	e, err := loadEnv()
	if err != nil {
		return err
	}
	for _, m := range misspeltEnv(os.Environ()) {
		log.Warn(m)
	}
	if r.admin && e.AdminToken == "" { // before the database, the migrations and the embedded NATS
		return &envError{"TOLLGATE_ADMIN_TOKEN is not set: `tollgate " + name + "` runs the admin API and needs its bearer token"}
	}
	if err := natsURLRequired(e, r); err != nil {
		return err
	}
	// The addresses too: a bad one was found only when its listener opened,
	// after the migrations. Every role serves the admin listener (/metrics).
	if err := listenAddress("TOLLGATE_ADMIN_LISTEN", e.AdminListen); err != nil {
		return err
	}
	if err := listenAddress("TOLLGATE_LISTEN", e.Listen); r.gateway && err != nil {
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
	if r.all() && e.NATSURL == "" { // serve embeds a single-node JetStream
		if err := cfg.Meter.CheckEmbedded(); err != nil {
			return &envError{err.Error()}
		}
	}
	setMemoryLimit(log, memlimit.FromCgroup)
	a, err := start(ctx, log, e, cfg, r)
	if errors.Is(err, errStoppedWaiting) {
		log.Info("tollgate stopped while waiting for the database or its migrations")
		return nil
	}
	if err != nil {
		return err
	}
	log.Info("tollgate running", "listen", a.Addr, "admin_listen", a.AdminAddr, "version", version())
	<-ctx.Done()
	log.Info("shutting down: finishing in-flight requests", "grace", a.grace.String())
	began := time.Now()
	err = a.close()
	if err != nil {
		log.Error("tollgate stopped with errors", "took", time.Since(began).Round(time.Millisecond).String(), "err", err)
		return err
	}
	log.Info("tollgate stopped", "took", time.Since(began).Round(time.Millisecond).String())
	return nil
}

// untilUp runs step until it succeeds or fails for another reason than
// the database not answering (ledger.Down), trying every 2 s and logging
// every 30 s; a stop (ctx) while it waits is errStoppedWaiting.
func untilUp(ctx context.Context, log *slog.Logger, step func() error) error {
	for wait := 0; ; wait++ {
		err := step()
		if err == nil || !ledger.Down(err) {
			return err
		}
		if wait%15 == 0 {
			log.Warn("database unreachable: waiting for it", "err", err)
		}
		select {
		case <-ctx.Done():
			return errStoppedWaiting
		case <-time.After(2 * time.Second):
		}
	}
}

// natsURLRequired returns an *envError when roles r include a gateway or a
// meter but not all three (only serve embeds JetStream) and e has no
// TOLLGATE_NATS_URL: exit code 2, before anything starts.
func natsURLRequired(e env, r roles) error {
	if !r.all() && (r.gateway || r.meter) && e.NATSURL == "" {
		return &envError{"TOLLGATE_NATS_URL is required: only `tollgate serve` embeds JetStream"}
	}
	return nil
}

// errStoppedWaiting is start's error when its context ended (SIGTERM)
// while it waited for an unreachable database, or for its migrations (the
// lock another process holds): a stop as asked, not a failure.
var errStoppedWaiting = errors.New("stopped while waiting for the database or its migrations")

// start opens the ledger, applies migrations when the process owns the
// whole stack (and refuses an unmigrated database otherwise), connects to
// (or embeds) JetStream, and starts the roles' components. It returns once
// every listener is bound; on error, what it started is stopped.
func start(ctx context.Context, log *slog.Logger, e env, cfg *fileConfig, r roles) (_ *app, err error) {
	a := &app{log: log, grace: e.ShutdownGrace}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	// Settings before anything starts: a single gateway or meter needs
	// the NATS it shares with the others.
	if err := natsURLRequired(e, r); err != nil {
		return nil, err
	}
	// The data directory first: a second process on it is refused before
	// it touches the database (migrations included).
	if r.gateway || (r.meter && e.NATSURL == "") { // the crash journal and spools, or the embedded JetStream's store
		release, err := lockDataDir(e.DataDir, r.String())
		if err != nil {
			return nil, err
		}
		logDataDir(log, e.DataDir)
		a.started("data directory lock", time.Second, func(context.Context) error { return release() })
	}
	// A gateway serves without the ledger: keys, limits and prices come
	// from NATS, usage goes to JetStream. One started while Postgres is
	// unreachable serves, rather than keep the LLM API down for the
	// outage; its customer API, and the look-ups of keys the buckets do
	// not hold yet, answer errors until the database is back.
	dbDown := false
	open := ledger.Open // serve creates its database; a single role expects `tollgate migrate` to have
	if !r.all() {
		open = ledger.OpenExisting
	}
	appName := ledger.ApplicationName(r.applicationName())
	openLedger := func() (err error) { a.store, err = open(ctx, e.DatabaseURL, appName); return err }
	if r.gatewayOnly() {
		err = openLedger()
	} else {
		// serve, meter and admin need the ledger: while Postgres is
		// unreachable (down, starting, out of connections) they wait for
		// it, rather than exit and leave a supervisor to restart them.
		err = untilUp(ctx, log, openLedger)
	}
	if errors.Is(err, errStoppedWaiting) {
		return nil, err
	}
	if err != nil {
		if ledger.Missing(err) {
			return nil, fmt.Errorf("%w: run `tollgate migrate` first (it creates the database), or check TOLLGATE_DATABASE_URL", err)
		}
		if !r.gatewayOnly() || !ledger.Down(err) {
			return nil, err
		}
		log.Warn("database unreachable: the gateway serves without it; its customer API (/v1/usage, /v1/balance, /v1/keys, /v1/requests, /v1/statements) "+
			"and look-ups of keys not yet in the key buckets fail until it is back", "err", err)
		if a.store, err = ledger.OpenLazy(e.DatabaseURL, appName); err != nil {
			return nil, err
		}
		dbDown = true
	}
	a.started("database", 5*time.Second, func(context.Context) error { a.store.Close(); return nil })
	// The database answered once; it may stop answering before the steps
	// below (stopping, restarting): serve, meter and admin wait on, the
	// gateway serves without it.
	step := func(f func() error) error {
		if r.gatewayOnly() {
			err := f()
			if ledger.Down(err) {
				log.Warn("database unreachable: the gateway serves without it", "err", err)
				dbDown = true
				return nil
			}
			return err
		}
		return untilUp(ctx, log, f)
	}
	switch {
	case r.all():
		err := step(func() error {
			// A migration may wait: for another process's migrations (a
			// lock, up to 10 minutes), or for a table's lock to build an index.
			log.Info("applying migrations")
			n, err := migrateLogged(ctx, log, a.store)
			if err != nil && ctx.Err() != nil {
				return errStoppedWaiting // a stop as asked: a migration in a transaction rolled back; one outside (11) is built again next time
			}
			if err == nil {
				log.Info("migrations applied", "count", n)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	case dbDown: // checked by the process that migrates it
	default:
		if err := step(func() error { return a.store.CheckMigrated(ctx) }); err != nil {
			return nil, err
		}
	}
	if err := cfg.Meter.Validate(); err != nil {
		return nil, err
	}
	mc := cfg.Meter
	reg := metrics.NewRegistry()
	mm := metrics.NewMeter(reg)
	if r.meter {
		mm.CollectConsumer() // the backlog is a worker's to report (TollgateMeterDown)
	}
	a.store.SetObserver(metrics.NewLedger(reg))
	check := a.store.Ping // a gateway serves without the ledger
	if r.meter || r.admin {
		check = a.store.CheckTables
	}
	a.db = newDBCheck(check)
	a.started("database check", 2*dbCheckTimeout, a.db.stop) // stopped before the database
	metrics.CollectDatabase(reg, a.db.up)
	for _, p := range cfg.Prices {
		if dbDown {
			log.Warn("seed prices not added: the database is unreachable (a meter or admin process adds them when it starts)")
			break
		}
		if err := step(func() error { _, err := a.store.EnsurePrice(ctx, p); return err }); err != nil {
			return nil, fmt.Errorf("seed price %s: %w", p.Model, err)
		}
	}
	var js jetstream.JetStream
	var dlqErr error // the dead-letter stream's, when the start could not make it
	if r.gateway || r.meter || (r.admin && e.NATSURL != "") {
		if js, err = a.connectNATS(e, r, mc.Sync()); err != nil {
			return nil, err
		}
		if a.ns != nil {
			mm.CollectEmbedded(a.ns)
		}
		// NATS may be down: the gateway then spools, and the worker waits.
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		if r.gateway || r.meter {
			if _, err := meter.EnsureStream(sctx, js, mc.Stream()); err != nil {
				then := "the worker waits for it"
				if r.gateway {
					then = "events are spooled until it is"
				}
				streamNotReady(log, "usage stream", then, err)
			}
		}
		if a.dlq, dlqErr = meter.EnsureDLQ(sctx, js, mc.Stream()); dlqErr != nil {
			streamNotReady(log, "dead-letter stream", "", dlqErr) // the admin role says what waits for it (retryDeadLetters)
			a.dlq = nil
		}
		scancel()
	}
	if r.meter {
		wc := mc.Worker()
		wc.Logger, wc.Observer = log, mm
		a.worker = meter.NewService(js, a.store, wc)
		a.worker.Start()
		a.started("meter worker", 15*time.Second, a.worker.Stop)
	}
	if js != nil && (r.meter || r.admin) {
		// The meter's budget flips and the admin's key changes leave the
		// ledger through its outbox; any number of syncers share it.
		a.keySync = keys.NewSyncer(a.store, a.openBuckets(js, mc), log)
		a.keySync.Start()
		a.started("key sync", 5*time.Second, a.keySync.Stop)
	}
	if r.gateway {
		if err := a.startGateway(ctx, e, cfg, mc, js, reg, mm); err != nil {
			return nil, err
		}
	}
	var adm *api.Admin
	if r.admin {
		var err error
		if adm, err = api.NewAdmin(a.store, e.AdminToken, log); err != nil {
			return nil, err
		}
		if len(e.AdminToken) < minAdminToken {
			log.Warn("TOLLGATE_ADMIN_TOKEN is short enough to be guessed (wrong tokens are slowed down per client address, not stopped, and many addresses guess faster): use 32 random bytes or more, such as `openssl rand -hex 32`, and keep TOLLGATE_ADMIN_LISTEN on the operators' network",
				"bytes", len(e.AdminToken))
		}
		switch {
		case a.dlq != nil:
			a.dlq.SetLog(log) // Remove's record of what it dropped from billing
			adm.SetDeadLetters(a.dlq)
		case dlqErr != nil: // NATS not reachable yet, or the stream refused until an operator's fix
			a.retryDeadLetters(js, mc.Stream(), adm, dlqErr, e.dlqRetry)
		}
		if a.keySync != nil {
			adm.SetKeySync(a.keySync)
		}
	}
	h, trusted := a.opsHandler(r, reg, adm, e.Pprof)
	a.admin = api.NewListener(h, log)
	if trusted != nil {
		a.admin.SetTrusted(trusted)
	}
	if err := a.admin.Start(e.AdminListen); err != nil {
		return nil, fmt.Errorf("TOLLGATE_ADMIN_LISTEN: %w", err)
	}
	a.AdminAddr = a.admin.Addr()
	a.started("admin listener", 10*time.Second, a.admin.Stop)
	return a, nil
}

// migrate applies every pending migration or, with --down-to N, rolls
// back to version N (an upgrade's undo; read the release's migrations
// first). A negative N is a usage error, caught before the database is
// opened; an N not below the database's version rolls nothing back, as
// goose's DownTo, and says so in a warning rather than claiming a rollback.
func migrate(ctx context.Context, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	downTo := int64(-1) // not given
	fs.Func("down-to", "roll back to migration version `N`, 0 or more (0 removes every table)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errors.New("want a migration version, 0 or more")
		}
		downTo = n
		return nil
	})
	if err := parseServerFlags(fs, args, stdout); err != nil {
		return err
	}
	e, err := loadEnv()
	if err != nil {
		return err
	}
	open := ledger.Open
	if downTo >= 0 {
		open = ledger.OpenExisting // a rollback of a database that is not there is a mistake, not a new database
	}
	s, err := open(ctx, e.DatabaseURL, ledger.ApplicationName("tollgate-migrate"))
	if err != nil {
		return err
	}
	defer s.Close()
	if downTo >= 0 {
		from, n, err := migrateDownLogged(ctx, log, s, downTo)
		if err != nil {
			return err
		}
		if n == 0 {
			log.Warn("nothing rolled back: the database's version is not above --down-to", "version", from, "to_version", downTo)
			return nil
		}
		log.Info("migrations rolled back", "count", n, "from_version", from, "to_version", downTo)
		return nil
	}
	n, err := migrateLogged(ctx, log, s)
	if err != nil {
		return err
	}
	log.Info("migrations applied", "count", n)
	return nil
}

// minAdminToken is the shortest admin token, in bytes, serve takes without
// a warning: the admin API and the console's sign-in answer every guess at
// once, so the token's length is what stands against guessing.
const minAdminToken = 32

// streamNotReady logs that the start could not make or update stream
// (what, as the log names it): JetStream refusing it as configured at
// ERROR with NATS' words, as no wait cures it (a gateway publishes to the
// stream if it is there as it was, and spools otherwise); NATS out of reach
// at WARN, saying then (what happens meanwhile), if not "".
func streamNotReady(log *slog.Logger, what, then string, err error) {
	if meter.Refused(err) {
		log.Error(what+" refused by JetStream as configured (check meter.replicas against the NATS servers, "+
			"and the stream's settings if it was made by hand); a gateway publishes to it if it is there, and spools otherwise", "err", err)
		return
	}
	if then != "" {
		then = "; " + then
	}
	log.Warn(what+" not reachable yet"+then, "err", err)
}
