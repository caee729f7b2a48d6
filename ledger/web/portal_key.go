package web

import (
	"context"

	"github.com/tollgate-dev/tollgate/ledger"
)

// limitedKey returns the signed-in key as GET /v1/key answers it, with
// its spend of today and this month, when it has a daily or monthly spend
// limit; nil otherwise.
func (p *Portal) limitedKey(ctx context.Context, secret string) (*ledger.Key, error) {
	var k ledger.Key
	if err := p.getJSON(ctx, secret, "/v1/key", &k); err != nil {
		return nil, err
	}
	if k.DailyLimit == nil && k.MonthlyLimit == nil {
		return nil, nil
	}
	return &k, nil
}
