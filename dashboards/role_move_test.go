package dashboards

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestMoveToTollgateRole: a compose volume made by an earlier release
// holds a database that Tollgate migrated and wrote as the postgres
// superuser; deploy/postgres-move-to-tollgate-role.sql, run once by the
// administrator after creating the role, hands the database and every
// object in it to the ordinary role, which then migrates (down and up)
// and writes as a fresh install's does.
func TestMoveToTollgateRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL, role := ledgertest.NewOwnedDatabase(t)
	adminURL := ledgertest.SuperuserURL(t, dbURL)
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	u, _ := url.Parse(dbURL)
	db := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+db+" OWNER TO CURRENT_USER"); err != nil {
		t.Fatal(err)
	}

	// Grafana's reader, made at the volume's initialisation by the earlier
	// release's script, whose default privileges named the superuser.
	var b [4]byte
	_, _ = rand.Read(b[:])
	reader := "grafana_reader_" + hex.EncodeToString(b[:])
	readerSQL := fmt.Sprintf(`CREATE ROLE %[1]s NOLOGIN; GRANT USAGE ON SCHEMA public TO %[1]s;
		ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO %[1]s`, reader)
	if _, err := conn.Exec(ctx, readerSQL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP OWNED BY "+reader+"; DROP ROLE "+reader); err != nil {
			t.Errorf("drop role %s: %v", reader, err)
		}
	})

	// The earlier release, as the superuser: tables, a month's partition.
	old, err := ledger.Open(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Migrate(ctx); err != nil {
		old.Close()
		t.Fatal(err)
	}
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := old.CreateCustomer(ctx, ledger.CustomerInput{Name: "moved"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := old.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	event := func(at time.Time) usage.Event {
		return usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: at, CustomerID: c.ID, KeyID: k.ID,
			Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK, HTTPStatus: 200,
			Usage: usage.Tokens{PromptTokens: 7}, UsageSource: usage.SourceUpstream}
	}
	if _, err := old.WriteEvents(ctx, []usage.Event{event(jan.Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	old.Close()

	script, err := os.ReadFile("../deploy/postgres-move-to-tollgate-role.sql")
	if err != nil {
		t.Fatal(err)
	}
	sql := regexp.MustCompile(`\btollgate\b`).ReplaceAllString(string(script), role)
	sql = strings.ReplaceAll(sql, "grafana_reader", reader)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("deploy/postgres-move-to-tollgate-role.sql: %v", err)
	}
	var left string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(what, ', '), '') FROM (
		SELECT 'database' AS what FROM pg_database WHERE datname = current_database() AND datdba <> $1::regrole
		UNION ALL SELECT c.oid::regclass::text FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relowner <> $1::regrole
		UNION ALL SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proowner <> $1::regrole
		UNION ALL SELECT t.oid::regtype::text FROM pg_type t WHERE t.typnamespace = 'public'::regnamespace AND t.typowner <> $1::regrole) o`,
		role).Scan(&left); err != nil || left != "" {
		t.Fatalf("not %s's after the move: %s (%v)", role, left, err)
	}

	// The new release, as the ordinary role.
	s, err := ledger.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.Migrate(ctx); err != nil || n != 0 {
		t.Fatalf("Migrate as %s = %d, %v; want nothing left to apply", role, n, err)
	}
	if _, err := s.WriteEvents(ctx, []usage.Event{event(jan.Add(2 * time.Hour)), event(jan.AddDate(0, 1, 0))}); err != nil {
		t.Fatalf("WriteEvents as %s: %v", role, err)
	}
	if r, err := s.Reconcile(ctx, jan, jan.AddDate(0, 2, 0)); err != nil || !r.Clean || r.Events != 3 {
		t.Fatalf("Reconcile as %s = %+v, %v; want 3 events, clean", role, r, err)
	}
	// The reader reads the month the earlier release made, and the one
	// the role made since.
	for _, table := range []string{"usage_events_2026_01", "usage_events_2026_02", "customers"} {
		if n, err := queryAs(ctx, conn, reader, "SELECT 1 FROM "+table); err != nil || n == 0 {
			t.Errorf("%s as Grafana's reader: %d rows, %v", table, n, err)
		}
	}
	if _, _, err := s.MigrateDown(ctx, 0); err != nil {
		t.Fatalf("MigrateDown(0) as %s: %v", role, err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again as %s: %v", role, err)
	}
}
