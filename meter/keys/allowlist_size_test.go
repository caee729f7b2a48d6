package keys_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestAHugeAllowlistDoesNotStopKeySync: a key's allowed_models is
// published in its state, one NATS message. An API review made a key
// with 9,000 models of 100 "<" each (a 0.97 MB body, under the admin
// API's 1 MiB): its state, the "<"s escaped as \u003c, was 5.4 MB, past
// NATS' max_payload; the syncer retried that change forever and every
// change after it (new keys, revocations) stopped reaching the gateways.
// The ledger refuses such a list, and the largest list it takes is
// published, with a revocation after it.
func TestAHugeAllowlistDoesNotStopKeySync(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sync := r.syncer()
	gw := r.cache(nil) // no loader: only what is pushed
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	list := func(n, size int) []string {
		models := make([]string, n)
		for i := range models {
			id := fmt.Sprint(i)
			models[i] = strings.Repeat("<", size-len(id)) + id
		}
		return models
	}
	_, _, err = r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "huge", AllowedModels: list(9000, 100)})
	if le := (*ledger.Error)(nil); !errors.As(err, &le) || le.Code != ledger.EInvalid || !strings.Contains(le.Message, "allowed_models") {
		t.Errorf("a key with 9,000 models of 100 bytes: err = %v; want EInvalid naming allowed_models", err)
	}
	// A list near the largest taken (64 KiB as JSON), of the longest
	// names, that escape the most.
	big, bigSecret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "big", AllowedModels: list(40, 256)})
	if err != nil {
		t.Fatalf("a key with the largest allowlist taken: %v", err)
	}
	k, secret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sync.Wait(wctx, k.Change); err != nil {
		t.Fatalf("the changes after a big allowlist are not published: %v", err)
	}
	// Wait returns once the syncer has published the changes, not once
	// the gateway's watch has applied them: under load (CI) the lookup
	// right after it found the big key not there yet.
	eventually(t, 10*time.Second, "the key with the largest allowlist on the gateway, with its 40 models", func() bool {
		st, ok := gw.LookupKey(bigSecret)
		return ok && st.KeyID == big.ID && len(st.AllowedModels) == len(big.AllowedModels)
	})
	if _, err := r.store.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the revocation on the gateway", func() bool {
		_, ok := gw.LookupKey(secret)
		return !ok
	})
}
