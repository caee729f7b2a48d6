package ledger_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestAnEntryKeyReplaysOnlyTheSameEntry: a credit's idempotency key
// replays the first entry for a retry that asks for the same one, and is
// EConflict for one dated a millisecond apart (effective_at is stored to
// the microsecond and compared so); a credit must be positive.
func TestAnEntryKeyReplaysOnlyTheSameEntry(t *testing.T) {
	b := newBilling(t, nil)
	at := jan.Add(time.Hour)
	in := ledger.EntryInput{Amount: "5", Memo: "jan", EffectiveAt: at, IdempotencyKey: "k"}
	first, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, in)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, in); err != nil || again.ID != first.ID {
		t.Fatalf("a retry = %+v, %v; want entry %d", again, err, first.ID)
	}
	in.EffectiveAt = at.Add(time.Millisecond)
	if e, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, in); ledger.ErrorCode(err) != ledger.EConflict {
		t.Errorf("the key again for a credit a millisecond later = %+v, %v; want EConflict", e, err)
	}
	if e, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "-5"}); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Errorf("a credit of -5 = %+v, %v; want EInvalid", e, err)
	}
	if bal, err := b.s.Balance(b.ctx, b.c.ID); err != nil || bal.Balance != "5" {
		t.Errorf("balance = %+v, %v; want 5 (one credit)", bal, err)
	}
}
