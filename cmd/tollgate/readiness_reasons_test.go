package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestReadinessKeepsEveryReasonOfARole: a role that cannot work for two
// reasons at once is degraded with both. /readyz kept only the last one
// found: a meter with Postgres and NATS both away said only "NATS is
// unreachable", and an operator who brought NATS back was then surprised
// by the database.
func TestReadinessKeepsEveryReasonOfARole(t *testing.T) {
	addr := freeAddr(t)
	natsOn(t, t.TempDir(), addr)
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close() // a connection that is not connected
	db := newDBCheck(func(context.Context) error { return errors.New("connection refused") })
	t.Cleanup(func() { db.stop(context.Background()) })
	a := &app{db: db, nc: nc}
	rd := a.readiness(t.Context(), roles{meter: true, admin: true})
	if why := rd.Degraded["meter"]; rd.Ready || !strings.Contains(why, "database") || !strings.Contains(why, "NATS is unreachable") {
		t.Errorf("readiness of a meter with Postgres and NATS both away: %+v; want the meter degraded for both", rd)
	}
	if why := rd.Degraded["admin"]; !strings.Contains(why, "database") {
		t.Errorf("readiness of an admin role with Postgres away: %+v; want the admin role degraded for the database", rd)
	}
}
