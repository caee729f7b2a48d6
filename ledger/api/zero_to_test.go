package api_test

import (
	"testing"
)

// TestToOfTheZeroTimeIsRefused: a to of 0001-01-01T00:00:00Z, Go's zero
// time, before which nothing is, is a 400 naming to, not read as no end
// (every request and all usage for all time). (Mutation audit survivor:
// the check dropped.)
func TestToOfTheZeroTimeIsRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, _, secret := s.customer(`{"name":"a"}`)
	for _, c := range []struct{ url, auth string }{
		{s.llm + "/v1/requests?to=0001-01-01T00:00:00Z", secret},
		{s.llm + "/v1/usage?to=0001-01-01T00:00:00Z", secret},
		{s.admin + "/admin/v1/usage?to=0001-01-01T00:00:00Z", adminToken},
	} {
		status, body, err := send("GET", c.url, c.auth, "")
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, c.url, status, body, "to")
	}
}
