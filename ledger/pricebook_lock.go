package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The price book lock orders the rating of events against changes to the
// price book (a price version, a customer's override), so that a
// re-rating run after a change sees every event rated without it:
//
//   - Raters (a meter batch, a re-rating batch) take it shared in
//     loadPricing, before they read the book, and hold it to their commit.
//   - A change (CreatePrice, CreateOverride) takes it exclusively before
//     anything else (priceBookLockExclusiveBounded), so it commits only
//     after every batch that read the book without it has committed.
//
// Without it, a meter batch that had read the book just before a version
// made in the past committed, and committed just after a re-rating of that
// period had read its events, kept the old price: the re-rating could not
// see it, and it was rated without the version. Changes are rare and
// short; a batch waits for one at most as long as the change takes.
// A change waiting for the lock makes the meter's new batches queue behind
// it (Postgres orders lock requests), so it waits at most spendLockWait
// (its transaction's lock_timeout) and then fails with EUnavailable, try
// again, as a limit change does (see the key spend lock).
const (
	priceBookLockKey              = `hashtext('tollgate price book')`
	priceBookLockShared           = `SELECT pg_advisory_xact_lock_shared(` + priceBookLockKey + `)`
	priceBookLockExclusiveBounded = `SET LOCAL lock_timeout = '` + spendLockWaitSQL + `'; SELECT pg_advisory_xact_lock(` + priceBookLockKey + `)`
)

// lockPriceBook takes the price book lock exclusively within tx, for a
// change to the book, waiting at most spendLockWait.
func lockPriceBook(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, priceBookLockExclusiveBounded)
	return err
}

// priceBookBusy is the error of a change to the price book whose wait for
// the price book lock ran out (SQLSTATE 55P03), what names the change,
// else nil.
func priceBookBusy(err error, what string) error {
	if !isCode(err, "55P03") {
		return nil
	}
	return errorf(EUnavailable, "%s could not be made now: the meter held a batch (or a re-rating) open for more than %s, "+
		"and is not held back longer for a change of prices; try again", what, spendLockWait)
}
