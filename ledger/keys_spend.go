package ledger

import "github.com/jackc/pgx/v5"

// keySpendColumns follow keyColumns in a read of keys joined with
// keySpendJoin: the key's spend of the current UTC day and month (as
// keyStateQuery reads it: a key_spend row of an earlier day or month is 0
// for this one), in 1e-12 units of the customer's currency as text;
// NULL for a key without a daily or monthly limit, whose spend the ledger
// does not keep (batchEffects).
const keySpendColumns = `,
	CASE WHEN daily_limit_micros IS NOT NULL OR monthly_limit_micros IS NOT NULL THEN
	  coalesce(CASE WHEN sp.day_start = d.day THEN sp.day_e12 END, 0)::text END,
	CASE WHEN daily_limit_micros IS NOT NULL OR monthly_limit_micros IS NOT NULL THEN
	  coalesce(CASE WHEN sp.month_start = d.month THEN sp.month_e12 END, 0)::text END`

// keySpendJoin follows "FROM api_keys" in a read of keys with
// keySpendColumns: the current UTC day and month by the database's clock,
// and the keys' spend.
const keySpendJoin = ` CROSS JOIN ` + spendPeriods + ` LEFT JOIN key_spend sp ON sp.key_id = api_keys.id`

// scanKeySpend scans keyColumns and keySpendColumns.
func scanKeySpend(row pgx.Row) (Key, error) {
	var day, month *string
	k, err := scanKey(row, &day, &month)
	if err != nil {
		return k, err
	}
	if k.DailySpend, err = e12String(day); err != nil {
		return k, err
	}
	k.MonthlySpend, err = e12String(month)
	return k, err
}

// e12String formats an optional amount in 1e-12 units (FormatE12).
func e12String(e12 *string) (*string, error) {
	if e12 == nil {
		return nil, nil
	}
	s, err := FormatE12(*e12)
	return &s, err
}
