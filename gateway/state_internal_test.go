package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRequestStateFilledInPlace: a request that carries a requestState
// (one a takeover made) gets its id and key without being copied; one that
// does not gets a copy with a new state, and the original is untouched.
func TestRequestStateFilledInPlace(t *testing.T) {
	bare := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	taken := bare.WithContext(withState(bare.Context()))
	for _, tc := range []struct {
		name   string
		r      *http.Request
		copied bool
	}{{"taken over", taken, false}, {"not taken over", bare, true}} {
		w := httptest.NewRecorder()
		r := withRequestID(w, tc.r)
		r2, st := stateFor(r)
		st.key, st.hasKey = usage.KeyState{KeyID: "k1"}, true
		if (r != tc.r) != tc.copied || r2 != r {
			t.Errorf("%s: copied %v, then %v; want %v, then not", tc.name, r != tc.r, r2 != r, tc.copied)
		}
		if id := requestIDOf(r); id == "" || id != w.Header().Get("X-Request-Id") || requestIDOf(r) != id {
			t.Errorf("%s: id %q, header %q", tc.name, id, w.Header().Get("X-Request-Id"))
		}
		if k := keyOf(r); k == nil || k.KeyID != "k1" {
			t.Errorf("%s: key %+v", tc.name, k)
		}
	}
	if stateOf(bare) != nil || keyOf(bare) != nil {
		t.Error("the request that was copied has a state")
	}
}
