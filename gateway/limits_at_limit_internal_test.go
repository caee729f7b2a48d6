package gateway

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// A key whose minute already holds its whole tpm_limit is refused: the
// limit is what it may use, not a count it must pass. A mutation audit:
// admitting while the tokens equal the limit (> for >=) passed every test.
func TestTPMLimitReachedExactlyRefuses(t *testing.T) {
	l := newLimiter(nil)
	at := time.Unix(1_800_000_000, 0)
	l.now = func() time.Time { return at }
	k := &usage.KeyState{KeyID: "0197a3c2-0000-7000-8000-0000000000a2", CustomerID: "c", TPMLimit: 100}
	release, over := l.admit(k, 40)
	if over != nil {
		t.Fatalf("first request under the limit: refused %+v", over)
	}
	release()
	l.tokens(k, 100) // its real tokens: the whole limit
	if _, over := l.admit(k, 1); over == nil || over.kind != "tokens" {
		t.Errorf("a request once the minute holds exactly tpm_limit tokens: %+v, want a tokens refusal", over)
	}
	at = at.Add(window * time.Second)
	if _, over := l.admit(k, 1); over != nil {
		t.Errorf("a minute later: refused %+v", over)
	}
}
