package ledger_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestPoolSize: the ledger's pool has at least ledger.DefaultMaxConns
// connections (pgxpool's 4 on a small machine left the customer API's
// half of it 2, one customer's worth), unless the url sets pool_max_conns.
func TestPoolSize(t *testing.T) {
	s, url := ledgertest.NewStoreURL(t)
	if want := max(ledger.DefaultMaxConns, runtime.NumCPU()); s.MaxConns() != want {
		t.Errorf("the pool of %s has %d connections, want %d", url, s.MaxConns(), want)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	own, err := ledger.Open(context.Background(), url+sep+"pool_max_conns=3")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if own.MaxConns() != 3 {
		t.Errorf("with pool_max_conns=3 the pool has %d connections, want 3", own.MaxConns())
	}
	lazy, err := ledger.OpenLazy(url)
	if err != nil {
		t.Fatal(err)
	}
	defer lazy.Close()
	if lazy.MaxConns() != s.MaxConns() {
		t.Errorf("OpenLazy's pool has %d connections, Open's %d", lazy.MaxConns(), s.MaxConns())
	}
}
