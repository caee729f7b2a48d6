package web_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleLimitsConcurrentSavesOneWins: two operators save the
// requests per minute of one key at the same instant, from pages that
// both showed the value stored, to two different values. setLimits read
// the key, checked each changed field's stored value against the one the
// page showed, then patched it: both read the old value, both passed the
// check, both were saved ("saved: 10 → 11" and "saved: 10 → 12"), the
// later silently overwriting the earlier. The check and the write are now
// one step in Postgres: in each round exactly one is saved, and the other
// gets the stale-value refusal a form sent after the first save gets.
func TestConsoleLimitsConcurrentSavesOneWins(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	cu, _, _ := g.customer("racing", "none", 0)
	rpm := int64(10)
	k, err := g.api.CreateKey(ctx, cu.ID, ledger.KeyInput{Name: "raced", RPMLimit: &rpm})
	if err != nil {
		t.Fatal(err)
	}
	var browsers [2]*http.Client
	var forms [2]map[string][]string
	for i := range browsers {
		browsers[i] = g.browser()
		g.signIn(browsers[i], "console", "token", adminToken)
		_, body, _ := g.do(browsers[i], "GET", "/console/keys?customer="+cu.ID, nil)
		forms[i] = limitsForm(t, body, k.ID)
	}
	const rounds = 60
	bothSaved := 0
	for round := range rounds {
		shown := strconv.FormatInt(rpm, 10)
		sent := [2]int64{rpm + 1, rpm + 2}
		var headers [2]http.Header
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range browsers {
			form := forms[i]
			form["rpm_limit_shown"] = []string{shown}
			form["rpm_limit"] = []string{strconv.FormatInt(sent[i], 10)}
			wg.Go(func() {
				<-start
				_, _, headers[i] = g.do(browsers[i], "POST", "/console/keys/"+k.ID+"/limits", form)
			})
		}
		close(start)
		wg.Wait()
		got, err := g.api.Key(ctx, k.ID)
		if err != nil || got.RPMLimit == nil {
			t.Fatalf("round %d: %v %v", round, got.RPMLimit, err)
		}
		saved, refused := 0, 0
		for i := range browsers {
			notice, failure, _ := g.limitsNotice(browsers[i], headers[i])
			switch {
			case strings.HasPrefix(notice, "Limits of key "+k.Prefix+"… saved: requests per minute "+shown+" → "+strconv.FormatInt(sent[i], 10)+"."):
				saved++
				if *got.RPMLimit != sent[i] {
					t.Errorf("round %d: saved %d, said so, and the key holds %d", round, sent[i], *got.RPMLimit)
				}
			case strings.Contains(failure, "Requests per minute was changed to "+strconv.FormatInt(*got.RPMLimit, 10)+
				" since this page was shown (it showed "+shown+"); you entered "+strconv.FormatInt(sent[i], 10)):
				refused++
			default:
				t.Fatalf("round %d, save of %d: notice %q, error %q; want saved, or refused as changed since shown", round, sent[i], notice, failure)
			}
		}
		if saved == 2 {
			bothSaved++
		} else if saved != 1 || refused != 1 {
			t.Errorf("round %d: %d saved, %d refused; want exactly one of each", round, saved, refused)
		}
		rpm = *got.RPMLimit
	}
	if bothSaved > 0 {
		t.Errorf("in %d rounds of %d, both concurrent saves of one field were saved (the later overwrote the earlier); want one", bothSaved, rounds)
	}
}
