package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCustomerListsItsOwnKeys: GET /v1/keys answers the caller's
// customer's keys, a page at a time, with their names, prefixes and
// limits and never a secret; another customer's keys are not among them.
// A customer review: usage grouped by key showed key ids no customer
// endpoint could name, and a key refused for its limit could not read
// what the limit was.
func TestCustomerListsItsOwnKeys(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a, firstA, secretA := s.customer(`{"name":"a","currency":"USD"}`)
	var second struct {
		ID     string `json:"id"`
		Secret string `json:"key"`
	}
	s.adm("POST", "/admin/v1/customers/"+a+"/keys", `{"name":"batch jobs","rpm_limit":60,"daily_limit":"5"}`, http.StatusCreated, &second)
	_, keyB, secretB := s.customer(`{"name":"b","currency":"USD"}`)

	type page struct {
		Data []struct {
			ID         string  `json:"id"`
			CustomerID string  `json:"customer_id"`
			Name       string  `json:"name"`
			Prefix     string  `json:"prefix"`
			RPMLimit   *int64  `json:"rpm_limit"`
			DailyLimit *string `json:"daily_limit"`
		} `json:"data"`
		NextCursor string `json:"next_cursor"`
	}
	get := func(path, secret string) (page, string) {
		t.Helper()
		status, body, err := send("GET", s.llm+path, secret, "")
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET %s = %d %s %v", path, status, body, err)
		}
		var p page
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
		return p, string(body)
	}
	p, body := get("/v1/keys", secretA)
	if len(p.Data) != 2 || p.Data[0].ID != firstA || p.Data[1].ID != second.ID || p.NextCursor != "" {
		t.Fatalf("GET /v1/keys = %s; want a's two keys, oldest first, no next page", body)
	}
	if k := p.Data[1]; k.Name != "batch jobs" || k.CustomerID != a || !strings.HasPrefix(second.Secret, k.Prefix) ||
		k.RPMLimit == nil || *k.RPMLimit != 60 || k.DailyLimit == nil || *k.DailyLimit != "5" {
		t.Errorf("the second key reads %+v; want its name, prefix and limits", k)
	}
	for _, leak := range []string{secretA, second.Secret, secretB, keyB} {
		if strings.Contains(body, leak) {
			t.Errorf("GET /v1/keys shows %q (a secret or another customer's key)", leak)
		}
	}
	one, _ := get("/v1/keys?limit=1", secretA)
	if len(one.Data) != 1 || one.Data[0].ID != firstA || one.NextCursor == "" {
		t.Fatalf("GET /v1/keys?limit=1 = %+v; want the first key and a next page", one)
	}
	rest, _ := get("/v1/keys?limit=1&cursor="+one.NextCursor, secretA)
	if len(rest.Data) != 1 || rest.Data[0].ID != second.ID {
		t.Errorf("the next page = %+v; want the second key", rest)
	}
	if pb, body := get("/v1/keys", secretB); len(pb.Data) != 1 || pb.Data[0].ID != keyB {
		t.Errorf("b's GET /v1/keys = %s; want b's one key", body)
	}
	for _, q := range []string{"?limit=0", "?customer_id=" + a, "?name=x"} {
		if status, body, err := send("GET", s.llm+"/v1/keys"+q, secretA, ""); err != nil || status != http.StatusBadRequest {
			t.Errorf("GET /v1/keys%s = %d %s %v, want 400", q, status, body, err)
		}
	}
	if status, _, err := send("GET", s.llm+"/v1/keys", "tg-nope", ""); err != nil || status != http.StatusUnauthorized {
		t.Errorf("GET /v1/keys with a wrong key = %d %v, want 401", status, err)
	}
}
