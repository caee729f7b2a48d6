package provider

import (
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// TestAmbiguousKeyDecodedAgrees: the encoding/json fallback of
// CheckPassedBody finds what jsonscan.AmbiguousKey finds on the bodies
// the latter can scan.
func TestAmbiguousKeyDecodedAgrees(t *testing.T) {
	names := []string{"model", "stream", "background"}
	for _, body := range []string{
		`{"model":"a","stream":true}`,
		` { "model" : "a" , "stream" : true } `,
		`{"model":"a","Model":"b"}`,
		`{"model":"a","model":"b"}`,
		`{"mod\u0065l":"a"}`,
		`{"\u017ftream":true}`,
		`{"x":{"Stream":1},"stream":false}`,
		`{"background":true,"BACKGROUND":false}`,
		`{}`,
		`[]`,
		`{"model":`,
	} {
		wantKey, want := jsonscan.AmbiguousKey([]byte(body), names...)
		gotKey, got := ambiguousKeyDecoded([]byte(body), names...)
		if got != want || gotKey != wantKey {
			t.Errorf("%s: decoded %q %v, jsonscan %q %v", body, gotKey, got, wantKey, want)
		}
	}
}
