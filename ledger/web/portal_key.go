package web

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/ledger"
)

// limitedKey returns the signed-in key as GET /v1/keys lists it, with its
// spend of today and this month, when it has a daily or monthly spend
// limit; nil otherwise. The API does not say which of the customer's keys
// sent it: the key is the active one whose prefix (the secret's first 11
// characters, 48 random bits) the secret starts with, found a page of
// ledger.MaxKeyLimit keys at a time.
func (p *Portal) limitedKey(ctx context.Context, secret string) (*ledger.Key, error) {
	cursor := ""
	for {
		path := "/v1/keys?limit=" + strconv.Itoa(ledger.MaxKeyLimit)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page ledger.KeyPage
		if err := p.getJSON(ctx, secret, path, &page); err != nil {
			return nil, err
		}
		for i, k := range page.Data {
			if k.RevokedAt == nil && k.Prefix != "" && strings.HasPrefix(secret, k.Prefix) {
				if k.DailyLimit == nil && k.MonthlyLimit == nil {
					return nil, nil
				}
				return &page.Data[i], nil
			}
		}
		if page.NextCursor == "" {
			return nil, nil
		}
		cursor = page.NextCursor
	}
}
