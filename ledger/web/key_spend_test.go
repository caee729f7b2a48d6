package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestKeySpendIsShown: a key refused (402) for its daily or monthly spend
// limit showed its customer nothing of that spend: the portal's usage
// page read "Available: unlimited" (the customer's credit), and the
// console's keys page showed the limits alone. The portal shows the
// signed-in key's spend of today and of this month against its limits,
// and the console each key's spend beside its limits, exact; an event of
// yesterday (UTC) counts in the month and not today.
func TestKeySpendIsShown(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	from := time.Now().UTC().AddDate(-1, 0, 0).Truncate(24 * time.Hour)
	if _, err := g.api.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "2.5", Output: "10", EffectiveFrom: from}); err != nil {
		t.Fatal(err)
	}
	cu, plainSecret, _ := g.customer("spender", "m", 0)
	daily, monthly := "5", "50"
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "capped", DailyLimit: &daily, MonthlyLimit: &monthly})
	if err != nil {
		t.Fatal(err)
	}
	now := nowInOneUTCDay() // the events and the pages of one UTC day
	today := now.Truncate(24 * time.Hour)
	ev := func(at time.Time, u usage.Tokens) usage.Event {
		return usage.Event{Version: usage.SchemaVersion, ID: uuid.Must(uuid.NewV7()).String(), Time: at, CustomerID: cu.ID,
			KeyID: k.ID, Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
			HTTPStatus: 200, FinishReason: "stop", UsageSource: usage.SourceUpstream, Usage: u}
	}
	if _, err := g.store.WriteEvents(ctx, []usage.Event{ev(now, usage.Tokens{PromptTokens: 1234, CompletionTokens: 567}), // 0.008755
		ev(now, usage.Tokens{PromptTokens: 1000, CompletionTokens: 1}),               // 0.00251
		ev(today.Add(-time.Minute), usage.Tokens{PromptTokens: 4000})}); err != nil { // yesterday: 0.01
		t.Fatal(err)
	}
	month := "0.021265"
	if today.Day() == 1 {
		month = "0.011265" // yesterday was last month's
	}

	c := g.browser()
	g.signIn(c, "portal", "key", k.Secret)
	_, body, _ := g.do(c, "GET", "/portal/", nil)
	card := func(body, id string) string {
		m := regexp.MustCompile(`id="` + id + `">([^<]*)<`).FindStringSubmatch(body)
		if m == nil {
			return "<no card>"
		}
		return strings.Join(strings.Fields(m[1]), " ")
	}
	for id, want := range map[string]string{"key-day": "0.011265 of 5 USD", "key-month": month + " of 50 USD"} {
		if got := card(body, id); got != want {
			t.Errorf("the portal's card %s reads %q, want %q", id, got, want)
		}
	}
	if !strings.Contains(body, "This key today") || !strings.Contains(body, "This key this month") {
		t.Errorf("the portal's key cards are not labelled as the key's")
	}
	if got := card(body, "available"); strings.Contains(got, "unlimited") {
		t.Errorf("the portal's Available card reads %q while the key's limits bind", got)
	}
	// A key without a spend limit has no such card.
	other := g.browser()
	g.signIn(other, "portal", "key", plainSecret)
	if _, body, _ := g.do(other, "GET", "/portal/", nil); strings.Contains(body, `id="key-day"`) || strings.Contains(body, `id="key-month"`) {
		t.Errorf("the portal shows key spend cards for a key without a spend limit")
	}

	con := g.browser()
	g.signIn(con, "console", "token", adminToken)
	status, page, _ := g.do(con, "GET", "/console/keys?customer="+cu.ID, nil)
	if status != http.StatusOK {
		t.Fatalf("GET /console/keys = %d", status)
	}
	row := page[strings.Index(page, `id="key-`+k.ID+`"`):]
	row = row[strings.Index(row, `data-label="Limits"`):]
	row = row[:strings.Index(row, "</td>")]
	for _, want := range []string{"daily 5 USD (0.011265 spent today)", "monthly 50 USD (" + month + " spent this month)"} {
		if !strings.Contains(row, want) {
			t.Errorf("the console's keys page does not show %q for the capped key: %s", want, row)
		}
	}
}

// TestKeyWithOneSpendLimitShowsIt: a key with a daily spend limit alone,
// or a monthly one alone, shows the portal that limit's card (and not the
// other's). A mutation audit: cards shown only for a key with both limits
// passed every test.
func TestKeyWithOneSpendLimitShowsIt(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("one-limit", "none", 0)
	limit := "7"
	for _, in := range []struct {
		key        ledger.KeyInput
		shown, not string
	}{
		{ledger.KeyInput{Name: "daily", DailyLimit: &limit}, `id="key-day"`, `id="key-month"`},
		{ledger.KeyInput{Name: "monthly", MonthlyLimit: &limit}, `id="key-month"`, `id="key-day"`},
	} {
		k, err := g.api.CreateKey(context.Background(), cu.ID, in.key)
		if err != nil {
			t.Fatal(err)
		}
		c := g.browser()
		g.signIn(c, "portal", "key", k.Secret)
		_, body, _ := g.do(c, "GET", "/portal/", nil)
		if !strings.Contains(body, in.shown) || strings.Contains(body, in.not) || !strings.Contains(body, "of 7 ") {
			t.Errorf("the portal of a key with only a %s limit: want %s (of 7) and no %s", in.key.Name, in.shown, in.not)
		}
	}
}
