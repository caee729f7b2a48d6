package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestSessionsEndAStalledTransaction: a meter worker stopped (SIGSTOP, a
// frozen VM) mid-batch held its transaction's row locks, and every other
// worker waited on them for as long as it stalled (a crash review: the
// ledger stood still for 70 s). Ledger sessions run with
// idle_in_transaction_session_timeout, unless the url sets its own.
func TestSessionsEndAStalledTransaction(t *testing.T) {
	ctx := context.Background()
	_, url := ledgertest.NewStoreURL(t)
	for _, c := range []struct{ url, want string }{
		{url, "1min"},
		{url + "&idle_in_transaction_session_timeout=5000", "5s"},
	} {
		s, err := ledger.Open(ctx, c.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.SettingForTest(ctx, "idle_in_transaction_session_timeout")
		s.Close()
		if err != nil || got != c.want {
			t.Errorf("%s: idle_in_transaction_session_timeout %q (%v), want %s", c.url, got, err, c.want)
		}
	}
}

// TestCheckTablesSeesAnEmptyDatabase: a meter's /readyz said database ok
// while the database had been dropped and created again empty (every
// batch failing on "relation does not exist"): Ping answers there.
// CheckTables does not.
func TestCheckTablesSeesAnEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	if err := ledgertest.NewStore(t).CheckTables(ctx); err != nil {
		t.Fatalf("a migrated ledger: %v", err)
	}
	empty, err := ledger.OpenExisting(ctx, ledgertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if err := empty.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := empty.CheckTables(ctx); err == nil || !strings.Contains(err.Error(), "tollgate migrate") {
		t.Fatalf("an empty database: %v, want it to say to run tollgate migrate", err)
	}
}
