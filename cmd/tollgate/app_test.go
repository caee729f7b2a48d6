package main

import (
	"context"
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
