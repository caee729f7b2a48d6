package ledger_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

func newEvent(customer, key, model string, at time.Time, u usage.Tokens) usage.Event {
	return usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: at,
		CustomerID: customer, KeyID: key, Provider: "sim", Model: model, Endpoint: "/v1/chat/completions",
		Stream: true, Status: usage.StatusOK, HTTPStatus: 200, Usage: u, UsageSource: usage.SourceUpstream}
}

func setup(t *testing.T) (*ledger.Store, ledger.Customer, ledger.Key) {
	t.Helper()
	s := ledgertest.NewStore(t)
	c, k := newCustomer(t, s)
	return s, c, k
}

// newCustomer creates customer "acme" in s, with key "ci".
func newCustomer(t *testing.T, s *ledger.Store) (ledger.Customer, ledger.Key) {
	t.Helper()
	ctx := context.Background()
	c, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if len(secret) != 46 || secret[:3] != "tg-" || k.Prefix != secret[:11] {
		t.Fatalf("secret %q prefix %q: want tg- and 43 base64url characters", secret, k.Prefix)
	}
	return c, k
}

func TestWriteEventsRatesByEffectiveDateAndIsIdempotent(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	feb := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	p1, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "usd", Input: "2", CachedInput: "1", CacheWrite: "3", Output: "8", EffectiveFrom: jan})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "4", Output: "16", EffectiveFrom: feb}); err != nil {
		t.Fatal(err)
	}
	u := usage.Tokens{PromptTokens: 1000, CachedTokens: 300, CacheWriteTokens: 100, CompletionTokens: 50, ReasoningTokens: 20}
	e1 := newEvent(c.ID, k.ID, "m", jan.Add(time.Hour), u)     // rated at p1
	e2 := newEvent(c.ID, k.ID, "m", feb.Add(time.Hour), u)     // rated at p2
	e3 := newEvent(c.ID, k.ID, "m", jan.Add(-time.Hour), u)    // before any price: unpriced
	e4 := newEvent(c.ID, k.ID, "other", jan.Add(time.Hour), u) // no price at all: unpriced
	// Duplicates at the start, the middle and the end of a batch.
	n, err := s.WriteEvents(ctx, []usage.Event{e1, e1, e2, e1, e3, e4, e2})
	if err != nil || n != 4 {
		t.Fatalf("WriteEvents = %d, %v; want 4 new", n, err)
	}
	n, err = s.WriteEvents(ctx, []usage.Event{e2, e1})
	if err != nil || n != 0 {
		t.Fatalf("redelivery: WriteEvents = %d, %v; want 0 new", n, err)
	}
	page, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: c.ID, GroupBy: "month"})
	if err != nil {
		t.Fatal(err)
	}
	rows := page.Data
	// Jan at p1: 600×2 + 300×1 + 100×3 + 50×8 = 2200 micro-units = 0.0022.
	// Feb at p2, where cached input and cache write default to the input price:
	// 1000×4 + 50×16 = 4800 micro-units = 0.0048.
	want := []ledger.UsageRow{
		{Group: "2025-12", Period: "2025-12", Requests: 1, PromptTokens: 1000, CachedTokens: 300, CacheWriteTokens: 100, CompletionTokens: 50, ReasoningTokens: 20, Cost: "0", Currency: "", UnpricedRequests: 1},
		// One row per month: January's unpriced event is counted in its priced row.
		{Group: "2026-01", Period: "2026-01", Requests: 2, PromptTokens: 2000, CachedTokens: 600, CacheWriteTokens: 200, CompletionTokens: 100, ReasoningTokens: 40, Cost: "0.0022", Currency: "USD", UnpricedRequests: 1},
		{Group: "2026-02", Period: "2026-02", Requests: 1, PromptTokens: 1000, CachedTokens: 300, CacheWriteTokens: 100, CompletionTokens: 50, ReasoningTokens: 20, Cost: "0.0048", Currency: "USD"},
	}
	if len(rows) != len(want) {
		t.Fatalf("usage rows = %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
	byModelPage, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: c.ID, From: jan, To: feb})
	byModel := byModelPage.Data
	if err != nil || len(byModel) != 2 || byModel[0].Model != "m" || byModel[0].Cost != "0.0022" || byModel[1].Model != "other" {
		t.Fatalf("usage by model in January = %+v, %v", byModel, err)
	}
	_ = p1
}

func TestLedgerIsAppendOnly(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", time.Now(), usage.Tokens{PromptTokens: 1})}); err != nil {
		t.Fatal(err)
	}
	err := s.ExecForTest(ctx, `UPDATE usage_events SET prompt_tokens = 0`)
	if err == nil {
		t.Fatal("UPDATE of a ledger row succeeded")
	}
	if err := s.ExecForTest(ctx, `DELETE FROM usage_events`); err == nil {
		t.Fatal("DELETE of a ledger row succeeded")
	}
}

func TestPricesRejectBadInputAndConflicts(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good := ledger.PriceInput{Model: "m", Currency: "EUR", Input: "1", Output: "2", EffectiveFrom: at}
	if _, err := s.CreatePrice(ctx, good); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePrice(ctx, good); ledger.ErrorCode(err) != ledger.EConflict {
		t.Fatalf("same model and effective_from: %v, want conflict", err)
	}
	if p, err := s.EnsurePrice(ctx, good); err != nil || p.InputMicros != 1_000_000 {
		t.Fatalf("EnsurePrice of an identical version = %+v, %v", p, err)
	}
	changed := good
	changed.Output = "3"
	if _, err := s.EnsurePrice(ctx, changed); ledger.ErrorCode(err) != ledger.EConflict {
		t.Fatalf("EnsurePrice of a changed version: %v, want conflict", err)
	}
	for _, bad := range []ledger.PriceInput{
		{Currency: "EUR", Input: "1", Output: "1", EffectiveFrom: at},
		{Model: "m", Currency: "EURO", Input: "1", Output: "1", EffectiveFrom: at},
		{Model: "m", Currency: "EUR", Input: "-1", Output: "1", EffectiveFrom: at},
		{Model: "m", Currency: "EUR", Input: "1", Output: "x", EffectiveFrom: at},
		{Model: "m", Currency: "EUR", Input: "1", Output: "1"},
	} {
		if _, err := s.CreatePrice(ctx, bad); ledger.ErrorCode(err) != ledger.EInvalid {
			t.Errorf("CreatePrice(%+v) = %v, want invalid", bad, err)
		}
	}
}

// TestLastUsedAtMovesAtMinutePrecision: a key's last_used_at is set by its
// first event, moves for an event a minute or more later, and is left
// alone by events within the minute (each batch used to rewrite it).
func TestLastUsedAtMovesAtMinutePrecision(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	lastUsed := func() time.Time {
		t.Helper()
		got, err := s.Key(ctx, k.ID)
		if err != nil || got.LastUsedAt == nil {
			t.Fatalf("key: %+v, %v", got, err)
		}
		return got.LastUsedAt.UTC()
	}
	t0 := time.Now().UTC().Truncate(time.Second)
	for _, step := range []struct {
		at, want time.Time
	}{
		{t0, t0},                       // the first use
		{t0.Add(30 * time.Second), t0}, // within the minute: left alone
		{t0.Add(-time.Hour), t0},       // an older event never moves it back
		{t0.Add(61 * time.Second), t0.Add(61 * time.Second)}, // a minute later: moved
	} {
		if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", step.at, usage.Tokens{PromptTokens: 1})}); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(); !got.Equal(step.want) {
			t.Fatalf("after an event at %v: last_used_at %v, want %v", step.at, got, step.want)
		}
	}
}

// TestStagingCopyMatchesPgx: Postgres reads the rows appendCopy sends as
// it reads the same rows sent by pgx's CopyFrom, odd values included.
func TestStagingCopyMatchesPgx(t *testing.T) {
	ours, viaPGX, err := ledgertest.NewStore(t).StagingCopiesForTest(context.Background(), t)
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) != 204 || !slices.Equal(ours, viaPGX) {
		t.Fatalf("%d rows copied by appendCopy, %d by pgx; want the same 204 rows\nours %.300q\npgx  %.300q", len(ours), len(viaPGX), ours, viaPGX)
	}
}

// TestWriteEventsRefusesOutOfRangeStatus: an http_status (above or below
// the range) or attempt no integer column holds is refused with its
// event's id (the worker sets that one aside), not sent truncated.
func TestWriteEventsRefusesOutOfRangeStatus(t *testing.T) {
	store := ledgertest.NewStore(t)
	for _, bad := range []struct{ status, attempt int }{{1 << 40, 1}, {-1 << 40, 1}, {200, 1 << 40}} {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: uuid.NewString(), KeyID: uuid.NewString(),
			Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK, HTTPStatus: bad.status,
			Attempt: bad.attempt, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
		_, err := store.WriteEvents(context.Background(), []usage.Event{e})
		var refused *usage.RefusedError
		if !errors.As(err, &refused) || refused.ID != e.ID {
			t.Errorf("http_status %d, attempt %d: WriteEvents = %v, want the event %s refused", bad.status, bad.attempt, err, e.ID)
		}
	}
}

// TestBatchRepeatsAnIDInAnotherCase: an id repeated in one batch with its
// hex digits in another case is one UUID (Validate takes both spellings):
// it is stored once, and the repeat counts as a duplicate.
func TestBatchRepeatsAnIDInAnotherCase(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	e1 := newEvent(c.ID, k.ID, "m", at, usage.Tokens{PromptTokens: 10})
	e1.ID = "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
	e2 := e1
	e2.ID = strings.ToUpper(e1.ID)
	e2.Time = at.Add(time.Second) // a republish stamped a moment later
	if err := e2.Validate(); err != nil {
		t.Fatalf("upper-case id refused by Validate: %v", err)
	}
	n, err := s.WriteEvents(ctx, []usage.Event{e1, e2})
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: c.ID})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || len(page.Data) != 1 || page.Data[0].Requests != 1 || page.Data[0].PromptTokens != 10 {
		t.Fatalf("WriteEvents = %d new; usage = %+v; want one event stored once", n, page.Data)
	}
}

// TestCheckMigratedSaysTheDatabaseIsDown: a meter started as Postgres
// stopped read the migration version on a connection the server ended, and
// exited with "the database has no migrations applied: run tollgate
// migrate" on a migrated database, where it should wait for it. The error
// is now the database being down (ledger.Down), which the roles wait out.
// (Found by a crash review.)
func TestCheckMigratedSaysTheDatabaseIsDown(t *testing.T) {
	s, dbURL := ledgertest.NewStoreURL(t)
	ctx := context.Background()
	if err := s.CheckMigrated(ctx); err != nil {
		t.Fatalf("CheckMigrated on a migrated database: %v", err)
	}
	allow := ledgertest.RefuseConnections(t, dbURL)
	err := s.CheckMigrated(ctx)
	if !ledger.Down(err) || strings.Contains(err.Error(), "no migrations") {
		t.Errorf("CheckMigrated with the database down: %v (down: %v); want the database down, not unmigrated", err, ledger.Down(err))
	}
	allow()
	if err := s.CheckMigrated(ctx); err != nil {
		t.Errorf("CheckMigrated with the database back: %v", err)
	}
}
