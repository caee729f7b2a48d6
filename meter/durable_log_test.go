package meter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestSetAsideLoggedWithItsCustomer: the ERROR line of a usage event the
// gateway sets aside for the dead-letter stream is a line about a request,
// and names its customer beside its id, as every such line does
// (docs/operations.md): it gave the request id alone, so the operator
// could not tell whose usage is missing from the ledger without digging the
// dead letter out.
func TestSetAsideLoggedWithItsCustomer(t *testing.T) {
	var logged bytes.Buffer
	spool, dead := openSpool(t), openSpool(t)
	d := meter.NewDurablePublisher(nil, spool, dead, func() bool { return true }, 0,
		slog.New(slog.NewJSONHandler(&logged, nil)), nil)
	e := testEvent(1)
	e.Time = time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC) // invalid: set aside, never published
	if err := d.Publish(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := dead.Stats(); n != 1 {
		t.Fatalf("%d dead letters spooled, want 1", n)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || !strings.Contains(l["msg"].(string), "set aside") {
			continue
		}
		found = true
		if l["request_id"] != e.ID || l["customer_id"] != e.CustomerID {
			t.Errorf("the line has request_id %v and customer_id %v; want %s and %s:\n%s", l["request_id"], l["customer_id"], e.ID, e.CustomerID, line)
		}
		// Its reason (the dead letter's too) says once what is wrong.
		if r, _ := l["reason"].(string); strings.Count(r, "invalid usage event") != 1 {
			t.Errorf("the reason %q does not name the invalid usage event once", r)
		}
	}
	if !found {
		t.Fatalf("no line about the event set aside:\n%s", logged.String())
	}
}
