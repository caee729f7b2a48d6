package ledger_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
)

func newEvent(customer, key, model string, at time.Time, u meter.Usage) meter.Event {
	return meter.Event{Version: meter.SchemaVersion, ID: uuid.NewString(), Time: at,
		CustomerID: customer, KeyID: key, Provider: "sim", Model: model, Endpoint: "/v1/chat/completions",
		Stream: true, Status: meter.StatusOK, HTTPStatus: 200, Usage: u, UsageSource: meter.SourceUpstream}
}

func setup(t *testing.T) (*ledger.Store, ledger.Customer, ledger.Key) {
	t.Helper()
	s := ledgertest.NewStore(t)
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
	return s, c, k
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
	u := meter.Usage{PromptTokens: 1000, CachedTokens: 300, CacheWriteTokens: 100, CompletionTokens: 50, ReasoningTokens: 20}
	e1 := newEvent(c.ID, k.ID, "m", jan.Add(time.Hour), u)     // rated at p1
	e2 := newEvent(c.ID, k.ID, "m", feb.Add(time.Hour), u)     // rated at p2
	e3 := newEvent(c.ID, k.ID, "m", jan.Add(-time.Hour), u)    // before any price: unpriced
	e4 := newEvent(c.ID, k.ID, "other", jan.Add(time.Hour), u) // no price at all: unpriced
	// Duplicates at the start, the middle and the end of a batch.
	n, err := s.WriteEvents(ctx, []meter.Event{e1, e1, e2, e1, e3, e4, e2})
	if err != nil || n != 4 {
		t.Fatalf("WriteEvents = %d, %v; want 4 new", n, err)
	}
	n, err = s.WriteEvents(ctx, []meter.Event{e2, e1})
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
		{Group: "2026-01", Period: "2026-01", Requests: 1, PromptTokens: 1000, CachedTokens: 300, CacheWriteTokens: 100, CompletionTokens: 50, ReasoningTokens: 20, Cost: "0", Currency: "", UnpricedRequests: 1},
		{Group: "2026-01", Period: "2026-01", Requests: 1, PromptTokens: 1000, CachedTokens: 300, CacheWriteTokens: 100, CompletionTokens: 50, ReasoningTokens: 20, Cost: "0.0022", Currency: "USD"},
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
	if _, err := s.WriteEvents(ctx, []meter.Event{newEvent(c.ID, k.ID, "m", time.Now(), meter.Usage{PromptTokens: 1})}); err != nil {
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

func TestKeySetSeesNewKeysAndKeepsSnapshot(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	ks := s.NewKeySet(slog.Default())
	if _, _, _, ok := ks.LookupKey("tg-nothing"); ok || ks.Loaded() {
		t.Fatal("empty key set found a key")
	}
	k2, secret, err := s.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	cust, key, blocked, ok := ks.LookupKey(secret)
	if !ok || blocked != "" || cust != c.ID || key != k2.ID || key == k.ID {
		t.Fatalf("LookupKey = %s %s %v, want %s %s", cust, key, ok, c.ID, k2.ID)
	}
	if _, _, _, ok := ks.LookupKey(secret + "x"); ok {
		t.Fatal("a wrong secret was accepted")
	}
	s.Close() // Postgres gone: the snapshot keeps serving.
	if err := ks.Refresh(ctx); err == nil {
		t.Fatal("Refresh on a closed store succeeded")
	}
	if _, _, _, ok := ks.LookupKey(secret); !ok {
		t.Fatal("a failed refresh dropped the snapshot")
	}
}

func TestCustomersAndKeysErrors(t *testing.T) {
	s := ledgertest.NewStore(t)
	ctx := context.Background()
	if _, err := s.CreateCustomer(ctx, ledger.CustomerInput{Name: "  "}); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Fatalf("empty name: %v", err)
	}
	if _, _, err := s.CreateKey(ctx, uuid.NewString(), ledger.KeyInput{Name: "k"}); ledger.ErrorCode(err) != ledger.ENotFound {
		t.Fatalf("key for a missing customer: %v", err)
	}
	if _, err := s.Customer(ctx, "not-a-uuid"); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Fatalf("malformed id: %v", err)
	}
	if _, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: uuid.NewString(), GroupBy: "week"}); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Fatalf("bad group_by: %v", err)
	}
}

func TestRevokeKey(t *testing.T) {
	s, c, k := setup(t)
	ctx := context.Background()
	got, err := s.RevokeKey(ctx, k.ID)
	if err != nil || got.RevokedAt == nil {
		t.Fatalf("RevokeKey = %+v, %v", got, err)
	}
	if _, err := s.RevokeKey(ctx, k.ID); ledger.ErrorCode(err) != ledger.EConflict {
		t.Fatalf("second revoke: %v, want conflict", err)
	}
	if _, err := s.RevokeKey(ctx, uuid.NewString()); ledger.ErrorCode(err) != ledger.ENotFound {
		t.Fatalf("unknown key: %v, want not found", err)
	}
	ks, err := s.Keys(ctx, c.ID)
	if err != nil || len(ks) != 1 || ks[0].RevokedAt == nil {
		t.Fatalf("Keys = %+v, %v", ks, err)
	}
}

// TestEnsurePriceConcurrently: processes starting together with the same
// seed prices all succeed, and the book holds one version.
func TestEnsurePriceConcurrently(t *testing.T) {
	s := ledgertest.NewStore(t)
	in := ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2", EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	errs := make(chan error, 8)
	for range 8 {
		go func() { _, err := s.EnsurePrice(context.Background(), in); errs <- err }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if ps, err := s.Prices(context.Background(), "m"); err != nil || len(ps) != 1 {
		t.Fatalf("prices = %+v, %v", ps, err)
	}
}
