package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// spendKey is what the tests read of a key's spend and limits.
type spendKey struct {
	ID           string  `json:"id"`
	DailyLimit   *string `json:"daily_limit"`
	MonthlyLimit *string `json:"monthly_limit"`
	DailySpend   *string `json:"daily_spend"`
	MonthlySpend *string `json:"monthly_spend"`
}

// TestKeysShowTheirSpend: a key with a daily or monthly limit was refused
// (402) once it had spent it, and neither API said how much of it was
// spent: GET /admin/v1/keys/{id}, GET /admin/v1/customers/{id}/keys and
// GET /v1/keys carried the limits only. They, and GET /v1/key (the key
// sent), carry daily_spend and
// monthly_spend, exact, an event of yesterday (UTC) in the month's and
// not the day's; "0" before any; absent on a key without a spend limit
// (the ledger keeps the spend of limited keys only).
func TestKeysShowTheirSpend(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := context.Background()
	from := time.Now().UTC().AddDate(-1, 0, 0).Truncate(24 * time.Hour)
	if _, err := s.client().CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "2.5", Output: "10", EffectiveFrom: from}); err != nil {
		t.Fatal(err)
	}
	cu, plain, _ := s.customer(`{"name":"spender","currency":"USD"}`)
	var k struct {
		ID     string `json:"id"`
		Secret string `json:"key"`
	}
	s.adm("POST", "/admin/v1/customers/"+cu+"/keys", `{"name":"capped","daily_limit":"5","monthly_limit":"50"}`, http.StatusCreated, &k)
	check := func(when, wantDay, wantMonth string) {
		t.Helper()
		var one spendKey
		s.adm("GET", "/admin/v1/keys/"+k.ID, "", http.StatusOK, &one)
		var admin, self struct{ Data []spendKey }
		s.adm("GET", "/admin/v1/customers/"+cu+"/keys", "", http.StatusOK, &admin)
		status, body, err := send("GET", s.llm+"/v1/keys", k.Secret, "")
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &self) != nil {
			t.Fatalf("GET /v1/keys = %d %s %v", status, body, err)
		}
		var mine spendKey
		status, body, err = send("GET", s.llm+"/v1/key", k.Secret, "")
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &mine) != nil || mine.ID != k.ID {
			t.Fatalf("GET /v1/key = %d %s %v; want the key sent", status, body, err)
		}
		for what, keys := range map[string][]spendKey{"GET /admin/v1/keys/{id}": {one},
			"GET /admin/v1/customers/{id}/keys": admin.Data, "GET /v1/keys": self.Data, "GET /v1/key": {mine}} {
			for _, got := range keys {
				switch got.ID {
				case k.ID:
					if str(got.DailySpend) != wantDay || str(got.MonthlySpend) != wantMonth ||
						str(got.DailyLimit) != "5" || str(got.MonthlyLimit) != "50" {
						t.Errorf("%s, %s: the capped key reads spend %s of 5 today, %s of 50 this month; want %s and %s",
							what, when, str(got.DailySpend), str(got.MonthlySpend), wantDay, wantMonth)
					}
				case plain:
					if got.DailySpend != nil || got.MonthlySpend != nil {
						t.Errorf("%s: the key without a spend limit reads spend %s, %s; want none", what, str(got.DailySpend), str(got.MonthlySpend))
					}
				}
			}
			if len(keys) != 2 && (what == "GET /admin/v1/customers/{id}/keys" || what == "GET /v1/keys") {
				t.Errorf("%s = %d keys, want 2", what, len(keys))
			}
		}
	}
	ledgertest.AwayFromMidnight(t)
	check("before any request", "0", "0")
	now := time.Now().UTC()
	today := now.Truncate(24 * time.Hour)
	s.write(event(cu, k.ID, "m", now, usage.Tokens{PromptTokens: 1234, CompletionTokens: 567}), // 0.003085 + 0.00567
		event(cu, k.ID, "m", now, usage.Tokens{PromptTokens: 1000, CompletionTokens: 1}), // 0.0025 + 0.00001
		event(cu, plain, "m", now, usage.Tokens{PromptTokens: 1000000}))                  // another key's: 2.5
	check("after two requests today", "0.011265", "0.011265")
	s.write(event(cu, k.ID, "m", today.Add(-time.Minute), usage.Tokens{PromptTokens: 4000})) // yesterday: 0.01
	month := "0.021265"
	if today.Day() == 1 { // yesterday was last month's
		month = "0.011265"
	}
	check("after a request of yesterday", "0.011265", month)
}

func str(s *string) string {
	if s == nil {
		return "<absent>"
	}
	return *s
}
