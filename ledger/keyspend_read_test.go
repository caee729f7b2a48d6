package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAKeysSpendOfAnEarlierDayReadsAsNothingToday: a key's key_spend row
// is left on the last day and month its events were written in; read
// today (Store.Key, the keys' page: the admin API and the console), a row
// of an earlier day is no spend of today's, and one of an earlier month
// none of this month's. Read as it is, yesterday's spend would show as
// today's against the daily limit. Once an event of today is written, the
// key's spend is that event's charge alone.
func TestAKeysSpendOfAnEarlierDayReadsAsNothingToday(t *testing.T) {
	s, c, k := limitedKey(t, "100")
	ctx := context.Background()
	// Left by the key's events of yesterday, in the month before this one:
	// 5 USD that day, 7 USD that month.
	if err := s.ExecForTest(ctx, `INSERT INTO key_spend (key_id, day_start, day_e12, month_start, month_e12)
		VALUES ('`+k.ID+`', date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 day', 5000000000000,
		        date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 month', 7000000000000)`); err != nil {
		t.Fatal(err)
	}
	check := func(when, day, month string) {
		t.Helper()
		got, err := s.Key(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DailySpend == nil || got.MonthlySpend == nil || *got.DailySpend != day || *got.MonthlySpend != month {
			t.Fatalf("%s: the key's spend (day, month) = %v, %v; want %s, %s", when, str(got.DailySpend), str(got.MonthlySpend), day, month)
		}
		page, err := s.KeysPage(ctx, c.ID, ledger.KeyQuery{})
		if err != nil {
			t.Fatal(err)
		}
		listed := 0
		for _, l := range page.Data {
			if l.ID != k.ID {
				continue
			}
			listed++
			if l.DailySpend == nil || l.MonthlySpend == nil || *l.DailySpend != day || *l.MonthlySpend != month {
				t.Fatalf("%s: the key listed has the spend (day, month) %v, %v; want %s, %s", when, str(l.DailySpend), str(l.MonthlySpend), day, month)
			}
		}
		if listed != 1 {
			t.Fatalf("%s: the key is listed %d times in %+v, want once", when, listed, page.Data)
		}
	}
	check("a row of yesterday and last month", "0", "0")
	// 1 USD per million tokens: 1000 tokens cost 0.001.
	if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", time.Now().UTC(), usage.Tokens{PromptTokens: 1000})}); err != nil {
		t.Fatal(err)
	}
	check("an event of today", "0.001", "0.001")
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
