package ledger

import (
	"strings"
	"time"
)

// KeyCondition is what a conditional KeyPatch (KeyPatch.If) requires of
// the key's stored limits: each field set is the value that limit must
// hold, as the key's read gives it (null: no limit; allowed_models, the
// list in the order read, null or []: every model). Amounts compare by
// value ("10.5" is "10.50").
type KeyCondition struct {
	DailyLimit    Optional[string]    `json:"daily_limit,omitzero"`
	MonthlyLimit  Optional[string]    `json:"monthly_limit,omitzero"`
	RPMLimit      Optional[int64]     `json:"rpm_limit,omitzero"`
	TPMLimit      Optional[int64]     `json:"tpm_limit,omitzero"`
	MaxConcurrent Optional[int64]     `json:"max_concurrent,omitzero"`
	ExpiresAt     Optional[time.Time] `json:"expires_at,omitzero"`
	AllowedModels Optional[[]string]  `json:"allowed_models,omitzero"`
}

// keyConditionSQL is the WHERE clause of UpdateKey's statement that holds
// a KeyCondition, from parameter $17 on (keyCondition.args): per limit,
// whether it is required, and its value.
const keyConditionSQL = `
	AND (NOT $17 OR daily_limit_micros IS NOT DISTINCT FROM $18::bigint)
	AND (NOT $19 OR monthly_limit_micros IS NOT DISTINCT FROM $20::bigint)
	AND (NOT $21 OR rpm_limit IS NOT DISTINCT FROM $22::bigint)
	AND (NOT $23 OR tpm_limit IS NOT DISTINCT FROM $24::bigint)
	AND (NOT $25 OR max_concurrent IS NOT DISTINCT FROM $26::bigint)
	AND (NOT $27 OR expires_at IS NOT DISTINCT FROM $28::timestamptz)
	AND (NOT $29 OR allowed_models = $30::text[])`

// args are c's parameters of keyConditionSQL (c nil: none required), or
// EInvalid for an amount that is not one.
func (c *KeyCondition) args() ([]any, error) {
	if c == nil {
		c = &KeyCondition{}
	}
	daily, err := optionalMicros("if.daily_limit", c.DailyLimit.Value)
	if err != nil {
		return nil, err
	}
	monthly, err := optionalMicros("if.monthly_limit", c.MonthlyLimit.Value)
	if err != nil {
		return nil, err
	}
	models := []string{}
	if c.AllowedModels.Value != nil && *c.AllowedModels.Value != nil {
		models = *c.AllowedModels.Value
	}
	return []any{c.DailyLimit.Set, daily, c.MonthlyLimit.Set, monthly, c.RPMLimit.Set, c.RPMLimit.Value,
		c.TPMLimit.Set, c.TPMLimit.Value, c.MaxConcurrent.Set, c.MaxConcurrent.Value,
		c.ExpiresAt.Set, c.ExpiresAt.Value, c.AllowedModels.Set, models}, nil
}

// failed is UpdateKey's error for a key whose limits do not hold what c
// requires.
func (c *KeyCondition) failed(keyID string) error {
	var names []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"daily_limit", c.DailyLimit.Set}, {"monthly_limit", c.MonthlyLimit.Set}, {"rpm_limit", c.RPMLimit.Set},
		{"tpm_limit", c.TPMLimit.Set}, {"max_concurrent", c.MaxConcurrent.Set}, {"expires_at", c.ExpiresAt.Set},
		{"allowed_models", c.AllowedModels.Set}} {
		if f.set {
			names = append(names, f.name)
		}
	}
	what := "its " + strings.Join(names, ", ") + " no longer hold the values"
	if len(names) == 1 {
		what = "its " + names[0] + " no longer holds the value"
	}
	return errorf(EConflict, "key %s was not changed: %s the patch's \"if\" gives "+
		"(changed since it was read); read the key again", keyID, what)
}
