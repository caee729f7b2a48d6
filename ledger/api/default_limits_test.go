package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestPagesWithoutALimitHoldTheDefault: without a limit, a page of the
// customer's request log holds 50 requests and a page of usage 100
// groups, as openapi.json says, each with a cursor to the next page that
// holds the rest. (Mutation audit survivors: the defaults changed.)
func TestPagesWithoutALimitHoldTheDefault(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a, key, secret := s.customer(`{"name":"a"}`)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var events []usage.Event
	for i := range 101 { // 101 requests, each in an hour of its own
		events = append(events, event(a, key, "m", start.Add(time.Duration(i)*time.Hour), usage.Tokens{PromptTokens: 1}))
	}
	s.write(events...)
	for _, c := range []struct {
		path      string
		page, all int
	}{{"/v1/requests", 50, 101}, {"/v1/usage?group_by=hour", 100, 101}} {
		var first, rest struct {
			Data       []any  `json:"data"`
			NextCursor string `json:"next_cursor"`
		}
		s.call("GET", s.llm+c.path, secret, "", http.StatusOK, &first)
		if len(first.Data) != c.page || first.NextCursor == "" {
			t.Errorf("GET %s: %d rows, cursor %q; want %d and a cursor", c.path, len(first.Data), first.NextCursor, c.page)
			continue
		}
		sep := "?"
		if c.path != "/v1/requests" {
			sep = "&"
		}
		s.call("GET", s.llm+c.path+sep+"limit=1000&cursor="+first.NextCursor, secret, "", http.StatusOK, &rest)
		if n := len(first.Data) + len(rest.Data); n != c.all || rest.NextCursor != "" {
			t.Errorf("GET %s: %d rows over both pages, cursor %q; want %d, no cursor", c.path, n, rest.NextCursor, c.all)
		}
	}
}
