package api

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestErrorTable: every code the server answers with comes back as itself,
// a status is one code only, and what the table does not know is internal.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	statuses := map[int]bool{}
	for _, row := range errorStatuses {
		if statuses[row.status] {
			t.Errorf("status %d is in the table twice", row.status)
		}
		statuses[row.status] = true
	}
	for _, code := range []string{ledger.EInvalid, ledger.EUnauthorized, ledger.ENotFound, ledger.EConflict,
		ledger.EInternal, ledger.EUnavailable} {
		if got := errorCode(errorStatus(code)); got != code {
			t.Errorf("code %s: answered with %d, read back as %q", code, errorStatus(code), got)
		}
	}
	if errorStatus("") != 0 || errorStatus("bogus") != 0 {
		t.Errorf("codes outside the table have statuses")
	}
	if errorCode(http.StatusTeapot) != ledger.EInternal || errorCode(http.StatusBadGateway) != ledger.EInternal {
		t.Errorf("statuses outside the table are not internal")
	}
}
