package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestANewMonthDoesNotWaitForReaders: a month's partition was made by
// CREATE TABLE … PARTITION OF, which takes an ACCESS EXCLUSIVE lock on
// usage_events: it waited for every open read of the events (an export, a
// reconciliation, pg_dump, which holds its lock for the whole backup), and
// while it waited every other write and read of usage_events queued behind
// it. At the first event of a month, a nightly backup or a finance export
// stalled the whole meter, and the admin API's reads, until it ended. The
// partition is now made apart and attached (ATTACH PARTITION takes SHARE
// UPDATE EXCLUSIVE, which neither readers nor writers conflict with).
func TestANewMonthDoesNotWaitForReaders(t *testing.T) {
	ctx := context.Background()
	s, url := ledgertest.NewStoreURL(t)
	customer, key := uuid.NewString(), uuid.NewString()
	event := func(at time.Time) usage.Event {
		return usage.Event{Version: 1, ID: uuid.NewString(), Time: at, CustomerID: customer, KeyID: key,
			Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
	}
	now := time.Now().UTC()
	if _, err := s.WriteEvents(ctx, []usage.Event{event(now)}); err != nil {
		t.Fatal(err)
	}
	reader, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	tx, err := reader.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) // unblocks a write left waiting by a failure
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM usage_events`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
	// And by its indexes, as the API's queries read.
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM usage_events WHERE customer_id = $1 AND occurred_at > $2`,
		customer, now.Add(-time.Hour)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
	// The read is open, as an export's or a backup's is. A new month's
	// first event, then this month's next.
	watch, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	for _, at := range []time.Time{now.AddDate(0, 2, 0), now} {
		done := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, time.Minute) // a guard against hanging; the test fails on the first lock wait
			defer cancel()
			_, err := s.WriteEvents(wctx, []usage.Event{event(at)})
			done <- err
		}()
	wait:
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("write of %s with a read open: %v", at.Format("2006-01"), err)
				}
				break wait
			case <-time.After(20 * time.Millisecond):
			}
			var waiting string
			if err := watch.QueryRow(ctx, `SELECT coalesce(string_agg(query, '; '), '') FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting != "" {
				t.Fatalf("the write of an event of %s waits for a lock the open read holds: %s", at.Format("2006-01"), waiting)
			}
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The partition made so is one like any other: the parent's indexes,
	// and append-only.
	part := "usage_events_" + now.AddDate(0, 2, 0).Format("2006_01")
	var parentIdx, partIdx int
	if err := watch.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_indexes WHERE tablename = 'usage_events'),
		(SELECT count(*) FROM pg_indexes WHERE tablename = $1)`, part).Scan(&parentIdx, &partIdx); err != nil {
		t.Fatal(err)
	}
	if parentIdx == 0 || partIdx != parentIdx {
		t.Errorf("%s has %d indexes, usage_events %d", part, partIdx, parentIdx)
	}
	if _, err := watch.Exec(ctx, `UPDATE `+part+` SET model = 'x'`); err == nil {
		t.Errorf("an event in %s was updated: the ledger is append-only", part)
	}
	if _, err := watch.Exec(ctx, `DELETE FROM usage_events WHERE occurred_at >= $1`, now.AddDate(0, 1, 0)); err == nil {
		t.Errorf("an event in %s was deleted: the ledger is append-only", part)
	}
	if _, err := s.WriteEvents(ctx, []usage.Event{event(now.AddDate(0, 2, 0))}); err != nil {
		t.Fatal(err)
	}
	var stored int
	if err := watch.QueryRow(ctx, `SELECT count(*) FROM `+part).Scan(&stored); err != nil || stored != 2 {
		t.Errorf("%s holds %d events (%v), want 2", part, stored, err)
	}
}

// TestADetachedMonthStaysDetached: a month's partition an operator
// detached to archive it (docs/operations.md, "Backups") is not attached
// again by a late event of that month: the event finds no partition and
// is refused as data (the worker sets it aside), as before partitions were
// made apart and attached.
func TestADetachedMonthStaysDetached(t *testing.T) {
	ctx := context.Background()
	other, conn, late := lateEventOfDetachedMonth(t, time.Date(2031, 3, 10, 0, 0, 0, 0, time.UTC), false)
	if _, err := other.WriteEvents(ctx, []usage.Event{late}); !errors.Is(err, usage.ErrBatchRefused) {
		t.Fatalf("WriteEvents of a detached month's event = %v; want it refused as data", err)
	}
	var attached bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = 'usage_events_2031_03'::regclass)`).Scan(&attached); err != nil || attached {
		t.Fatalf("the detached partition is attached again (%v)", err)
	}
}

// TestAnArchivedMonthIsNotMadeAgain: docs/operations.md ("Backups") has the
// operator detach a closed month, archive it with pg_dump -t and drop it.
// A late event of that month must still find no partition and be refused
// as data (the worker sets it aside, to be replayed once the archive is
// attached again), not make the month anew: a new table of the archive's
// name would hold the late events alone, the archive could no longer be
// restored under its name, and the doc's ATTACH would fail.
func TestAnArchivedMonthIsNotMadeAgain(t *testing.T) {
	ctx := context.Background()
	other, conn, late := lateEventOfDetachedMonth(t, time.Date(2031, 5, 10, 0, 0, 0, 0, time.UTC), true)
	if _, err := other.WriteEvents(ctx, []usage.Event{late}); !errors.Is(err, usage.ErrBatchRefused) {
		t.Errorf("WriteEvents of an archived month's event = %v; want it refused as data", err)
	}
	var made bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('usage_events_2031_05') IS NOT NULL`).Scan(&made); err != nil || made {
		t.Errorf("the archived month's partition was made again (%v)", err)
	}
}

// lateEventOfDetachedMonth writes an event at at, detaches its month's
// partition (and drops it when drop is set), and returns a Store that never
// made that partition (another process, a restart), a connection to the
// database, and a late event of the same month not yet written.
func lateEventOfDetachedMonth(t *testing.T, at time.Time, drop bool) (*ledger.Store, *pgx.Conn, usage.Event) {
	t.Helper()
	ctx := context.Background()
	s, url := ledgertest.NewStoreURL(t)
	event := usage.Event{Version: 1, ID: uuid.NewString(), Time: at, CustomerID: uuid.NewString(), KeyID: uuid.NewString(),
		Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
	if _, err := s.WriteEvents(ctx, []usage.Event{event}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	part := pgx.Identifier{"usage_events_" + at.Format("2006_01")}.Sanitize()
	if _, err := conn.Exec(ctx, `ALTER TABLE usage_events DETACH PARTITION `+part); err != nil {
		t.Fatal(err)
	}
	if drop {
		if _, err := conn.Exec(ctx, `DROP TABLE `+part); err != nil {
			t.Fatal(err)
		}
	}
	other, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	late := event
	late.ID = uuid.NewString()
	late.Time = at.Add(time.Hour)
	return other, conn, late
}
