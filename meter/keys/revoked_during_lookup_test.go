package keys_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/keys"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// revokingLoader reads a key's state from the ledger, then, before
// answering, revokes the key and waits until the revocation has reached
// the cache: a revocation that lands while a lookup is in flight.
type revokingLoader struct {
	r     *rig
	cache *keys.Cache
}

func (l *revokingLoader) KeyState(ctx context.Context, hash string) (usage.KeyState, usage.CustomerState, bool, error) {
	k, c, ok, err := l.r.store.KeyState(ctx, hash)
	if err != nil || !ok {
		return k, c, ok, err
	}
	revoked, err := l.r.store.RevokeKey(ctx, k.KeyID)
	if err != nil {
		l.r.t.Error(err)
		return k, c, ok, nil
	}
	// The syncer starts only now, so that the key was unknown to the
	// cache (its first sync publishes every key's state).
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.r.syncer().Wait(wctx, revoked.Change); err != nil {
		l.r.t.Error(err)
	}
	if err := l.cache.CatchUp(wctx); err != nil {
		l.r.t.Error(err)
	}
	return k, c, ok, nil
}

// TestRevocationDuringALookupWins: a key the cache does not hold is looked
// up in the ledger; its revocation reaches the cache while that lookup is
// in flight, and the lookup then answers the state it read before. The
// key is refused, on that lookup and after. A mutation audit: the miss
// path's final read accepting a revoked row passed every test
// (TestRevocationWinsOverARacingLookup has the revocation in before the
// lookup starts).
func TestRevocationDuringALookupWins(t *testing.T) {
	r := newRig(t)
	_, secret := r.oneKey()
	l := &revokingLoader{r: r}
	l.cache = r.cache(l)
	if st, ok := l.cache.LookupKey(secret); ok {
		t.Fatalf("a key revoked while its lookup was in flight was accepted: %+v", st)
	}
	if _, ok := l.cache.LookupKey(secret); ok {
		t.Fatal("a key revoked while its lookup was in flight was accepted afterwards")
	}
}
