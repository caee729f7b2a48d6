package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRerateStoppedSaysToRunItAgain: a re-rating stopped short, by the
// operator (Ctrl-C: its context ends) or by its database session cut
// (pg_terminate_backend, a failover), told the operator only "context
// canceled", or "the ledger database is not reachable now; retry
// shortly", and not that the batches committed before it stopped are
// kept and that running the same re-rating again finishes the range (a
// script that runs it without --progress saw nothing else). The
// re-rating is held at its first batch by a session holding the
// re-rating lock.
func TestRerateStoppedSaysToRunItAgain(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a, aKey, _ := s.customer(`{"name":"a"}`)
	jan, feb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	s.write(event(a, aKey, "m", jan.Add(time.Hour), usage.Tokens{PromptTokens: 1000}))
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"0","effective_from":"2025-01-01T00:00:00Z"}`, http.StatusCreated, nil)

	ctx := context.Background()
	holder, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(hashtext('rerate'))`); err != nil {
		t.Fatal(err)
	}
	const again = "run the same re-rating again"

	// Stopped by its client.
	cctx, cancel := context.WithCancel(ctx)
	_, err = s.client().Rerate(cctx, jan, feb, func(ledger.RerateProgress) { cancel() })
	if err == nil || !strings.Contains(err.Error(), again) {
		t.Errorf("a re-rating whose client stopped: %v; want it to say to %s", err, again)
	}

	// Its session cut, once it waits for the lock (the stopped one's
	// wait ended first: its query is cancelled after the client returns).
	waiting := func() int {
		var n int
		if err := holder.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND pid <> pg_backend_pid()
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); waiting() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stopped re-rating still waits for the lock")
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.client().Rerate(ctx, jan, feb, nil)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := holder.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND pid <> pg_backend_pid()
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the re-rating did not wait for the lock")
		}
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the re-rating whose session was cut did not end")
	}
	if ledger.ErrorCode(err) != ledger.EUnavailable || !strings.Contains(err.Error(), again) {
		t.Errorf("a re-rating whose session was cut: %v (%s); want unavailable, saying to %s", err, ledger.ErrorCode(err), again)
	}

	// Run again, it finishes.
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('rerate'))`); err != nil {
		t.Fatal(err)
	}
	res, err := s.client().Rerate(ctx, jan, feb, nil)
	if err != nil || res.Adjusted != 1 {
		t.Fatalf("the re-rating run again = %+v, %v; want the event adjusted", res, err)
	}
}
