package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// TestCLICustomersAndKeys: customers create, list, get, update and
// balance; keys create (secret shown once, with a warning), list, revoke.
func TestCLICustomersAndKeys(t *testing.T) {
	s := newStack(t, nil)
	out := s.tgOK("customers", "create", "--name", "globex", "--currency", "eur", "--credit-limit", "10.00")
	id := field(t, out, "ID")
	if field(t, out, "Currency") != "EUR" || field(t, out, "Credit limit") != "10" && field(t, out, "Credit limit") != "10.00" {
		t.Fatalf("create:\n%s", out)
	}
	rows := tableRows(t, s.tgOK("customers", "list"), "ID")
	if len(rows) != 2 || rows[0][1] != "acme" || rows[1][0] != id {
		t.Fatalf("list: %q", rows)
	}
	var list struct{ Data []ledger.Customer }
	s.tgJSON(&list, "customers", "list", "--name", "globex")
	if len(list.Data) != 1 || list.Data[0].ID != id {
		t.Fatalf("list --name --json: %+v", list)
	}
	if got := field(t, s.tgOK("customers", "get", id), "Name"); got != "globex" {
		t.Fatalf("get: name %q", got)
	}
	// Flags after the argument work too.
	var c ledger.Customer
	s.tgJSON(&c, "customers", "update", id, "--name", "globex corp", "--no-credit-limit")
	if c.Name != "globex corp" || c.CreditLimit != nil {
		t.Fatalf("update: %+v", c)
	}
	// Names need not be unique, but a second customer of the same name
	// (the README's block run twice) is told, naming the first.
	if r := s.tg("customers", "create", "--name", "globex corp"); r.code != exitOK ||
		!strings.Contains(r.errOut, "already named") || !strings.Contains(r.errOut, id) {
		t.Fatalf("a second customer named globex corp: exit %d, stderr %q; want it made, with a note naming %s", r.code, r.errOut, id)
	}
	if r := s.tg("customers", "create", "--name", "initech"); r.code != exitOK || r.errOut != "" {
		t.Fatalf("a customer of a new name: exit %d, stderr %q; want no note", r.code, r.errOut)
	}
	out = s.tgOK("customers", "update", id, "--credit-limit", "25.5")
	if field(t, out, "Credit limit") != "25.5" {
		t.Fatalf("update --credit-limit:\n%s", out)
	}
	out = s.tgOK("customers", "balance", id)
	if field(t, out, "Balance") != "0 EUR" || field(t, out, "Available") != "25.5" {
		t.Fatalf("customers balance:\n%s", out)
	}

	r := s.tg("keys", "create", "--customer", id, "--name", "ci", "--daily-limit", "5", "--monthly-limit", "50")
	if r.code != exitOK || !strings.Contains(r.errOut, "not shown again") {
		t.Fatalf("keys create: exit %d, stderr %q", r.code, r.errOut)
	}
	keyID, secret := field(t, r.out, "ID"), field(t, r.out, "Secret")
	if !strings.HasPrefix(secret, ledger.KeyPrefix) || field(t, r.out, "Daily limit") != "5" {
		t.Fatalf("keys create:\n%s", r.out)
	}
	rows = tableRows(t, s.tgOK("keys", "list", "--customer", id), "ID")
	if len(rows) != 1 || rows[0][0] != keyID || rows[0][len(rows[0])-1] != "active" || strings.Contains(rows[0][2], secret) {
		t.Fatalf("keys list: %q", rows)
	}
	// sim-pro is priced in USD: a EUR customer's limited key is refused
	// it (402 currency_mismatch) until the customer has a price in EUR.
	s.refreshKeys()
	if code, errCode := s.chatCode(secret); code != http.StatusPaymentRequired || errCode != "currency_mismatch" {
		t.Fatalf("chat with the new key, USD-priced model: %d %q, want 402 currency_mismatch", code, errCode)
	}
	s.tgOK("overrides", "create", "--customer", id, "--model", "sim-pro", "--currency", "EUR",
		"--input", "2", "--output", "8", "--effective-from", "2026-01-01")
	s.refreshKeys()
	if code, _ := s.chatAs(secret); code != http.StatusOK {
		t.Fatalf("chat with the new key: %d", code)
	}
	// keys get shows what the key has spent of its limit, once the meter
	// has written the request (GET /admin/v1/keys/{id}'s daily_spend).
	deadline := time.Now().Add(10 * time.Second)
	for daily := ""; !strings.Contains(daily, "spent today") || strings.Contains(daily, "(0 spent"); daily = field(t, s.tgOK("keys", "get", keyID), "Daily limit") {
		if time.Now().After(deadline) {
			t.Fatalf("keys get: daily limit %q 10 s after a request with the key; want what it has spent of it", daily)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// keys list's table shows the spend beside each limit, as keys get
	// does (it showed the limits alone; --json had the spend).
	got := s.tgOK("keys", "get", keyID)
	table := s.tgOK("keys", "list", "--customer", id)
	for _, f := range []string{"Daily limit", "Monthly limit"} {
		if want := field(t, got, f); !strings.Contains(want, " spent ") || !strings.Contains(table, want) {
			t.Fatalf("keys list shows no %s %q, as keys get does:\n%s", f, want, table)
		}
	}
	if field(t, s.tgOK("keys", "revoke", keyID), "Revoked") == "-" {
		t.Fatal("keys revoke: no revocation time")
	}
	var keys struct{ Data []ledger.Key }
	s.tgJSON(&keys, "keys", "list", "--customer", id)
	if len(keys.Data) != 1 || keys.Data[0].RevokedAt == nil {
		t.Fatalf("keys list --json after revoke: %+v", keys)
	}
	s.refreshKeys()
	if code, _ := s.chatAs(secret); code != http.StatusUnauthorized {
		t.Fatalf("chat with the revoked key: %d, want 401", code)
	}
}

// TestCLIPricesOverridesRerate: an unpriced request, priced afterwards with
// prices create, is charged by rerate; overrides create and list, both kinds.
func TestCLIPricesOverridesRerate(t *testing.T) {
	s := newStack(t, func(c *fileConfig) { c.Prices = nil })
	from := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Hour).Format(time.RFC3339)
	to := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Hour).Format(time.RFC3339)
	_, reqID := s.chatAs(s.secret)
	if e := s.event(reqID); !e.Unpriced {
		t.Fatalf("event priced without a price: %+v", e)
	}

	// A start in the past is noted: the events already stored keep their
	// price until re-rated, while those delivered late are rated by it.
	r := s.tg("prices", "create", "--model", "sim-pro", "--currency", "USD", "--input", "2.50",
		"--cached-input", "1.25", "--output", "10", "--effective-from", from)
	out := r.out
	if r.code != exitOK || !strings.Contains(r.errOut, "note: --effective-from is in the past") ||
		!strings.Contains(r.errOut, "tollgate rerate --from "+from) {
		t.Fatalf("prices create from the past: exit %d, stderr %q", r.code, r.errOut)
	}
	if field(t, out, "Model") != "sim-pro" || !strings.Contains(field(t, out, "Prices (per 1M tokens)"), "input 2.5") {
		t.Fatalf("prices create:\n%s", out)
	}
	if strings.Contains(r.errOut, "no --cached-input") {
		t.Errorf("prices create with --cached-input: stderr %q notes its absence", r.errOut)
	}
	// Without --cached-input, cached prompt tokens are charged at the
	// input rate, and the CLI says so.
	r = s.tg("prices", "create", "--model", "sim-small", "--currency", "USD", "--input", "0.15", "--output", "0.6",
		"--effective-from", "2026-01-01", "--effective-to", "2027-01-01")
	if r.code != exitOK || !strings.Contains(r.errOut, "note: no --cached-input: this price charges cached prompt tokens (cached_tokens) at --input (0.15 per million)") {
		t.Fatalf("prices create without --cached-input: exit %d, stderr %q", r.code, r.errOut)
	}
	// A version that ended in the past too: its rerate ends where it did,
	// not now (over the later events it would find no price of its own).
	pastFrom := time.Now().UTC().Add(-72 * time.Hour).Format("2006-01-02")
	pastTo := time.Now().UTC().Add(-48 * time.Hour).Format("2006-01-02")
	r = s.tg("prices", "create", "--model", "sim-old", "--currency", "USD", "--input", "1", "--output", "2",
		"--effective-from", pastFrom, "--effective-to", pastTo)
	if r.code != exitOK || !strings.Contains(r.errOut, "tollgate rerate --from "+pastFrom+" --to "+pastTo) {
		t.Fatalf("prices create over a past period: exit %d, stderr %q; want the rerate over that period", r.code, r.errOut)
	}
	rows := tableRows(t, s.tgOK("prices", "list"), "ID")
	if len(rows) != 3 {
		t.Fatalf("prices list: %q", rows)
	}
	var prices struct{ Data []api.Price }
	s.tgJSON(&prices, "prices", "list", "--model", "sim-pro")
	if len(prices.Data) != 1 || prices.Data[0].Input != "2.5" && prices.Data[0].Input != "2.50" {
		t.Fatalf("prices list --model --json: %+v", prices)
	}

	r = s.tg("rerate", "--from", from, "--to", to, "--progress")
	if out = r.out; r.code != exitOK || field(t, out, "Examined") != "1" || field(t, out, "Adjusted") != "1" || field(t, out, "Newly priced") != "1" {
		t.Fatalf("rerate: exit %d\n%s", r.code, out)
	}
	if !strings.Contains(r.errOut, "through "+from) || !strings.Contains(r.errOut, "(0%): 0 examined") {
		t.Errorf("rerate --progress: stderr %q, want a line through the range's start", r.errOut)
	}
	// 6 uncached × 2.50 + 6 cached × 1.25 + 24 completion × 10, per million (README).
	if got := field(t, s.tgOK("balance", "--customer", s.customerID), "Charges"); got != "0.0002625" {
		t.Fatalf("charges after rerate: %s", got)
	}

	out = s.tgOK("overrides", "create", "--customer", s.customerID, "--discount-percent", "12.5", "--effective-from", "2026-01-01")
	if field(t, out, "Terms") != "12.5% off the price book" || field(t, out, "Model") != "(all models)" {
		t.Fatalf("overrides create (discount):\n%s", out)
	}
	// A custom price that leaves out the cache classes charges them at
	// its input, and the CLI says so (a review: "cheaper" than the list,
	// it charged cache reads 60% above it); given, it says nothing.
	r = s.tg("overrides", "create", "--customer", s.customerID, "--model", "sim-pro", "--currency", "USD",
		"--input", "2", "--output", "8", "--effective-from", "2026-01-01")
	if r.code != exitOK || !strings.Contains(r.errOut, "no --cached-input: this custom price charges those prompt tokens at --input (2 per million)") ||
		!strings.Contains(r.errOut, "no --cache-write") {
		t.Fatalf("overrides create without the cache classes: exit %d, stderr %q", r.code, r.errOut)
	}
	if r := s.tg("overrides", "create", "--customer", s.customerID, "--model", "sim-small", "--currency", "USD",
		"--input", "2", "--cached-input", "1", "--cache-write", "2.5", "--output", "8", "--effective-from", "2026-01-01"); r.code != exitOK || strings.Contains(r.errOut, "no --c") {
		t.Fatalf("overrides create with the cache classes: exit %d, stderr %q", r.code, r.errOut)
	}
	var ovs struct{ Data []api.Override }
	s.tgJSON(&ovs, "overrides", "list", "--customer", s.customerID)
	if len(ovs.Data) != 3 {
		t.Fatalf("overrides list --json: %+v", ovs)
	}
	out = s.tgOK("overrides", "list", "--customer", s.customerID)
	if !strings.Contains(out, "12.5% off") || !strings.Contains(out, "input 2, cached 2, cache write 2, output 8 USD") {
		t.Fatalf("overrides list:\n%s", out)
	}
	// Another discount for all models from the same time: conflict; from
	// a later time, it takes over then.
	s.tgFail(exitConflict, "overlaps", "overrides", "create", "--customer", s.customerID, "--discount-percent", "5", "--effective-from", "2026-01-01")
	s.tgOK("overrides", "create", "--customer", s.customerID, "--discount-percent", "5", "--effective-from", "2026-06-01")
}

// TestCLICredits: grant (twice with one idempotency key: one credit),
// adjust, list, reverse, balance.
func TestCLICredits(t *testing.T) {
	s := newStack(t, nil)
	first := s.tgOK("credits", "grant", "--customer", s.customerID, "--amount", "100", "--memo", "top-up", "--idempotency-key", "k1")
	again := s.tgOK("credits", "grant", "--customer", s.customerID, "--amount", "100", "--memo", "top-up", "--idempotency-key", "k1")
	if field(t, first, "Entry") != field(t, again, "Entry") || field(t, first, "Amount") != "100 USD" {
		t.Fatalf("grant twice:\n%s\n%s", first, again)
	}
	var adj ledger.Entry
	s.tgJSON(&adj, "credits", "adjust", "--customer", s.customerID, "--amount", "-5", "--memo", "correction")
	if adj.Kind != ledger.KindAdjustment || adj.Amount != "-5" {
		t.Fatalf("adjust: %+v", adj)
	}
	rows := tableRows(t, s.tgOK("credits", "list", "--customer", s.customerID), "ID")
	if len(rows) != 2 || rows[0][1] != "credit" || rows[1][1] != "adjustment" {
		t.Fatalf("credits list: %q", rows)
	}
	// --limit: the latest entries, one page, and the cursor of those before;
	// --cursor: that page.
	r := s.tg("credits", "list", "--customer", s.customerID, "--limit", "1")
	rows = tableRows(t, r.out, "ID")
	cursor := regexp.MustCompile(`--cursor (\S+),`).FindStringSubmatch(r.errOut)
	if r.code != 0 || len(rows) != 1 || rows[0][1] != "adjustment" || cursor == nil {
		t.Fatalf("credits list --limit 1: exit %d, rows %q, stderr %q; want the adjustment and a cursor", r.code, rows, r.errOut)
	}
	var page ledger.EntryPage
	s.tgJSON(&page, "credits", "list", "--customer", s.customerID, "--cursor", cursor[1])
	if len(page.Data) != 1 || page.Data[0].Kind != ledger.KindCredit || page.NextCursor != "" {
		t.Fatalf("credits list --cursor: %+v; want the credit, the last page", page)
	}
	s.tgFail(exitUsage, "--limit", "credits", "list", "--customer", s.customerID, "--limit", "0")
	var entries struct{ Data []ledger.Entry }
	s.tgJSON(&entries, "credits", "list", "--customer", s.customerID, "--from", "2000-01-01", "--to", "2000-02-01")
	if len(entries.Data) != 0 {
		t.Fatalf("credits list --from --to in 2000: %+v", entries)
	}
	out := s.tgOK("balance", "--customer", s.customerID)
	if field(t, out, "Balance") != "95 USD" || field(t, out, "Credits") != "100" {
		t.Fatalf("balance:\n%s", out)
	}
	out = s.tgOK("credits", "reverse", field(t, first, "Entry"), "--memo", "granted by mistake")
	if field(t, out, "Kind") != ledger.KindRefund || field(t, out, "Amount") != "-100 USD" {
		t.Fatalf("reverse:\n%s", out)
	}
	if got := field(t, s.tgOK("customers", "balance", s.customerID), "Balance"); got != "-5 USD" {
		t.Fatalf("balance after reverse: %s", got)
	}
	// --effective-at dates a payment received earlier (a finance review:
	// docs/billing.md describes backdating, which only the API could do).
	var back ledger.Entry
	s.tgJSON(&back, "credits", "grant", "--customer", s.customerID, "--amount", "7", "--effective-at", "2026-01-15")
	if !back.EffectiveAt.Equal(time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC)) || back.Amount != "7" {
		t.Fatalf("grant --effective-at 2026-01-15: %+v", back)
	}
	s.tgJSON(&back, "credits", "adjust", "--customer", s.customerID, "--amount", "-2", "--effective-at", "2026-01-16T12:00:00+02:00")
	if !back.EffectiveAt.Equal(time.Date(2026, 1, 16, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("adjust --effective-at 2026-01-16T12:00:00+02:00: %+v", back)
	}
	s.tgFail(exitUsage, "--effective-at", "credits", "grant", "--customer", s.customerID, "--amount", "1", "--effective-at", "last week")
}

// TestCLICreditFinerThanTheCurrency: `tollgate credits grant --amount
// 0.001` recorded a tenth of a cent for a USD customer. An amount with more
// decimals than the customer's currency has is refused (exit 5, naming the
// minor unit and --allow-sub-minor), and recorded as typed with
// --allow-sub-minor.
func TestCLICreditFinerThanTheCurrency(t *testing.T) {
	s := newStack(t, nil)
	grant := s.tgFail(exitInvalid, "USD's minor unit is 0.01 (2 decimal places)", "credits", "grant", "--customer", s.customerID, "--amount", "0.001")
	adjust := s.tgFail(exitInvalid, "--allow-sub-minor", "credits", "adjust", "--customer", s.customerID, "--amount", "-0.005")
	// The refusal names commands that run: it said "tollgate credits
	// --allow-sub-minor", which exits 2 (unknown command "--allow-sub-minor").
	for _, msg := range []string{grant, adjust} {
		if strings.Contains(msg, "tollgate credits --allow-sub-minor") || !strings.Contains(msg, "tollgate credits grant") ||
			!strings.Contains(msg, "adjust") {
			t.Errorf("refusal %q: want it to name tollgate credits grant and adjust with --allow-sub-minor", msg)
		}
	}
	if r := s.tg("credits", "--allow-sub-minor"); r.code != exitUsage {
		t.Fatalf("tollgate credits --allow-sub-minor: exit %d, want %d (not a command)", r.code, exitUsage)
	}
	if got := field(t, s.tgOK("balance", "--customer", s.customerID), "Balance"); got != "0 USD" {
		t.Fatalf("balance after refused entries: %s", got)
	}
	out := s.tgOK("credits", "grant", "--customer", s.customerID, "--amount", "0.001", "--allow-sub-minor")
	if field(t, out, "Amount") != "0.001 USD" {
		t.Fatalf("grant --amount 0.001 --allow-sub-minor:\n%s", out)
	}
}
