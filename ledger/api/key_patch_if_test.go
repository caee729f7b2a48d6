package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestKeyPatchIfIsOneStep: a PATCH of a key with "if" applies only while
// each limit it names holds the value given, checked in the statement that
// writes: of two patches sent at once with the same "if", exactly one
// applies and the other is 409, nothing changed. A patch whose "if" no
// longer holds is 409 and changes nothing; without "if", a patch applies
// whatever the key holds, as before. Requests and answers fit openapi.json.
func TestKeyPatchIfIsOneStep(t *testing.T) {
	s := newServer(t)
	c := newContract(t)
	_, keyID, _ := s.customer(`{"name":"acme"}`)
	path := s.admin + "/admin/v1/keys/" + keyID
	c.check(http.MethodPatch, path, adminToken, `{"rpm_limit":10,"daily_limit":"5.5","allowed_models":["b","a"]}`, http.StatusOK)

	rpm := 10
	for round := range 40 {
		var wg sync.WaitGroup
		var statuses [2]int
		start := make(chan struct{})
		for i := range statuses {
			body := fmt.Sprintf(`{"rpm_limit":%d,"if":{"rpm_limit":%d,"daily_limit":"5.50"}}`, rpm+1+i, rpm)
			wg.Go(func() {
				<-start
				var err error
				if statuses[i], _, err = send(http.MethodPatch, path, adminToken, body); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		var k struct {
			RPMLimit int `json:"rpm_limit"`
		}
		s.adm(http.MethodGet, "/admin/v1/keys/"+keyID, "", http.StatusOK, &k)
		won, conflicts := -1, 0
		for i, st := range statuses {
			switch st {
			case http.StatusOK:
				won = i
			case http.StatusConflict:
				conflicts++
			}
		}
		if won < 0 || conflicts != 1 {
			t.Fatalf("round %d: two patches of rpm_limit at once, each if rpm_limit is %d: %v; want one 200 and one 409", round, rpm, statuses)
		}
		if k.RPMLimit != rpm+1+won {
			t.Fatalf("round %d: rpm_limit %d, want %d, the patch answered 200", round, k.RPMLimit, rpm+1+won)
		}
		rpm = k.RPMLimit
	}

	b := c.check(http.MethodPatch, path, adminToken, fmt.Sprintf(`{"rpm_limit":1,"if":{"rpm_limit":%d,"tpm_limit":5}}`, rpm), http.StatusConflict)
	if !strings.Contains(string(b), "rpm_limit, tpm_limit") {
		t.Errorf("a patch whose if does not hold: %s; want it to name the fields", b)
	}
	c.check(http.MethodPatch, path, adminToken, `{"rpm_limit":2,"if":{"allowed_models":["a","b"]}}`, http.StatusConflict)
	c.check(http.MethodPatch, path, adminToken, fmt.Sprintf(`{"rpm_limit":3,"if":{"allowed_models":["b","a"],"tpm_limit":null,"expires_at":null,"monthly_limit":null,"max_concurrent":null,"rpm_limit":%d}}`, rpm), http.StatusOK)
	if status, body, _ := send(http.MethodPatch, path, adminToken, `{"if":{"rpm_limit":3}}`); status != http.StatusBadRequest || !strings.Contains(string(body), "nothing to change") {
		t.Errorf("a patch of an \"if\" alone: %d %s; want 400, nothing to change", status, body)
	}
	c.check(http.MethodPatch, path, adminToken, `{"rpm_limit":4}`, http.StatusOK)
	var k struct {
		RPMLimit int `json:"rpm_limit"`
	}
	s.adm(http.MethodGet, "/admin/v1/keys/"+keyID, "", http.StatusOK, &k)
	if k.RPMLimit != 4 {
		t.Errorf("rpm_limit %d after the patches; want 4 (two refused, two applied)", k.RPMLimit)
	}
}
