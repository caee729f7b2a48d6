package web_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestConsoleKeyExpirySaysItsFormat: a key's limits form says which forms
// its expiry takes, beside the field, and a refusal names them: the label
// said only "Expires (UTC)", the field showed 2027-01-31T00:00:00, and
// "31/01/2027" was refused as "not a date (2026-01-31)", which hid that a
// time of day is taken too. The forms it names are taken.
func TestConsoleKeyExpirySaysItsFormat(t *testing.T) {
	g := newRig(t)
	cu, _, _ := g.customer("acme", "sim-pro", 0)
	k, err := g.api.CreateKey(context.Background(), cu.ID, ledger.KeyInput{Name: "second"})
	if err != nil {
		t.Fatal(err)
	}
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/keys?customer="+cu.ID, nil)
	label := regexp.MustCompile(`<label for="exp-` + k.ID + `">([^<]*)</label>`).FindStringSubmatch(body)
	if label == nil || !strings.Contains(label[1], "UTC") || !strings.Contains(label[1], "YYYY-MM-DD") || !strings.Contains(label[1], "HH:MM") {
		t.Errorf("the expiry's label is %q; want it to say UTC and the forms taken", label)
	}
	_, _, h := g.do(c, "POST", "/console/keys/"+k.ID+"/limits", url.Values{"csrf": {csrf}, "customer": {cu.ID}, "expires_at": {"31/01/2027"}})
	_, body, _ = g.do(c, "GET", h.Get("Location"), nil)
	msg := regexp.MustCompile(`<p class="field-error" id="exp-` + k.ID + `-error">([^<]*)</p>`).FindStringSubmatch(body)
	if msg == nil || !strings.Contains(msg[1], "2026-01-31T18:00") {
		t.Errorf("the refusal of 31/01/2027 is %q; want it to name the forms taken", msg)
	}
	for _, v := range []string{"2027-01-31", "2027-01-31T18:00", "2027-01-31T18:00:00"} {
		g.do(c, "POST", "/console/keys/"+k.ID+"/limits", url.Values{"csrf": {csrf}, "customer": {cu.ID}, "expires_at": {v}})
		got, err := g.api.Key(context.Background(), k.ID)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := time.Parse("2006-01-02T15:04:05", (v + "T00:00:00:00")[:19])
		if strings.Contains(v, "T") {
			want, _ = time.Parse("2006-01-02T15:04:05", (v + ":00")[:19])
		}
		if got.ExpiresAt == nil || !got.ExpiresAt.Equal(want) {
			t.Errorf("expires_at %q stored as %v, want %v", v, got.ExpiresAt, want)
		}
	}
}
