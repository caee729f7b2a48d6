package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestAppStartsAndStopsInOrder: serve's components start in an order that
// lets each use the ones before it, and close stops them in the reverse
// order (the gateway before the worker that writes its last events, the
// database, then the data directory's lock, taken first so that a second
// process on it is refused before it migrates; the limit share before the
// key cache, so that a gateway hears the others' counts while its keys
// load); a second close does nothing.
func TestAppStartsAndStopsInOrder(t *testing.T) {
	s := newStack(t, nil)
	var names []string
	for _, st := range s.app.stops {
		names = append(names, st.name)
	}
	want := []string{"data directory lock", "database", "database check", "embedded NATS", "NATS connection", "meter worker", "key sync", "limit share", "key cache", "spool",
		"dead-letter spool", "spool republisher", "crash journal", "gateway", "console", "admin listener"}
	if !slices.Equal(names, want) {
		t.Fatalf("started %v, want %v", names, want)
	}
	// The gateway's stop begins as close begins (it stops taking
	// requests), not after the admin listener's wait for its exports.
	var early []string
	for _, st := range s.app.stops {
		if st.early {
			early = append(early, st.name)
		}
	}
	if !slices.Equal(early, []string{"gateway"}) {
		t.Fatalf("stops begun as close begins: %v, want [gateway]", early)
	}
	if err := s.app.close(); err != nil {
		t.Fatal(err)
	}
	if err := s.app.close(); err != nil || len(s.app.stops) != 0 {
		t.Fatalf("a second close: %v, %d left", err, len(s.app.stops))
	}
	s.app = nil
}

// TestOneRoleNeedsAMigratedDatabase: a process of one role does not
// migrate, and says what to run when the database is not migrated.
func TestOneRoleNeedsAMigratedDatabase(t *testing.T) {
	e := env{DatabaseURL: ledgertest.NewDatabase(t), AdminToken: testAdminToken, Listen: "127.0.0.1:0",
		AdminListen: "127.0.0.1:0", DataDir: t.TempDir(), ShutdownGrace: time.Second}
	cfg := &fileConfig{}
	if err := cfg.Meter.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := start(context.Background(), slog.New(slog.NewJSONHandler(io.Discard, nil)), e, cfg, roles{admin: true})
	if err == nil || !strings.Contains(err.Error(), "run `tollgate migrate`") {
		t.Fatalf("start of the admin role on an empty database = %v, want a pointer to tollgate migrate", err)
	}
}

// TestCloseReportsEveryFailedStop: close goes on past a stop that fails,
// the early one's included, and returns every failure, each naming its
// component: a shutdown that lost something says so (exit code 1).
func TestCloseReportsEveryFailedStop(t *testing.T) {
	a := &app{grace: time.Second}
	var first bool
	a.started("database", 0, func(context.Context) error { first = true; return nil })
	a.startedEarly("gateway", 0, func(context.Context) error { return errors.New("gateway broke") })
	a.started("admin listener", 0, func(context.Context) error { return errors.New("listener broke") })
	err := a.close()
	if err == nil || !strings.Contains(err.Error(), "stop gateway: gateway broke") ||
		!strings.Contains(err.Error(), "stop admin listener: listener broke") || !first {
		t.Fatalf("close = %v (first-started stopped: %t); want both failures named, and every stop run", err, first)
	}
}

// TestCloseGivesEachStopItsTimeout: a stop started with no timeout of its
// own (the gateway's) has the shutdown grace (TOLLGATE_SHUTDOWN_GRACE),
// the others their own.
func TestCloseGivesEachStopItsTimeout(t *testing.T) {
	a := &app{grace: time.Hour}
	left := map[string]time.Duration{}
	for _, c := range []struct {
		name    string
		timeout time.Duration
	}{{"gateway", 0}, {"spool", 2 * time.Second}} {
		a.started(c.name, c.timeout, func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			left[c.name] = time.Until(d)
			return nil
		})
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	if left["gateway"] <= 2*time.Second || left["gateway"] > time.Hour || left["spool"] > 2*time.Second {
		t.Fatalf("time left to the stops: %v; want the gateway's near the 1 h grace, the spool's within its 2 s", left)
	}
}

// TestOneRoleDoesNotCreateItsDatabase: a process of one role on a
// database that does not exist says to run `tollgate migrate`, which
// creates it, and does not create it itself (serve and migrate do): a
// mistyped TOLLGATE_DATABASE_URL would have started on a new, empty
// database.
func TestOneRoleDoesNotCreateItsDatabase(t *testing.T) {
	dbURL, exists := ledgertest.MissingDatabase(t)
	ctx := context.Background()
	e := env{DatabaseURL: dbURL, AdminToken: testAdminToken, Listen: "127.0.0.1:0",
		AdminListen: "127.0.0.1:0", DataDir: t.TempDir(), ShutdownGrace: time.Second}
	cfg := &fileConfig{}
	if err := cfg.Meter.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := start(ctx, slog.New(slog.DiscardHandler), e, cfg, roles{admin: true})
	if err == nil {
		_ = a.close()
	}
	if err == nil || !strings.Contains(err.Error(), "run `tollgate migrate` first (it creates the database)") {
		t.Errorf("start of the admin role on a database that does not exist = %v, want a pointer to tollgate migrate", err)
	}
	if exists() {
		t.Errorf("the admin role's start made its database: only serve and migrate do")
	}
}

// TestAListenAddressInUseNamesItsVariable: a listen address another
// process holds stops the start with an error naming the variable to
// change, not only Go's "address already in use".
func TestAListenAddressInUseNamesItsVariable(t *testing.T) {
	s := newStack(t, nil)
	for _, c := range []struct {
		variable string
		r        roles
		edit     func(*env)
	}{
		{"TOLLGATE_ADMIN_LISTEN", roles{admin: true}, func(e *env) { e.AdminListen = s.app.AdminAddr }},
		{"TOLLGATE_LISTEN", roles{gateway: true, meter: true, admin: true}, func(e *env) { e.Listen = s.app.Addr }},
	} {
		e := s.env
		e.Listen, e.AdminListen, e.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
		c.edit(&e)
		a, err := start(context.Background(), s.log, e, s.cfg, c.r)
		if err == nil {
			_ = a.close()
		}
		if err == nil || !strings.HasPrefix(err.Error(), c.variable+": ") || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("start with %s on an address in use: %v; want the variable named", c.variable, err)
		}
	}
}
