package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// The full sync's lease: several Syncers (each meter and admin process
// runs one) find the bucket unmarked at once when a deployment starts, and
// two full syncs of a million keys at once cost minutes of CPU, the second
// one's create-only writes all failing into one version-checked put per
// key. The Syncer holding the lease syncs; the others wait for the mark,
// publishing the outbox's changes meanwhile.
const (
	// syncLease is the keys bucket's entry of the lease (not a key hash:
	// gateways skip it).
	syncLease = "_sync_lease"
	// leaseTTL is how long a lease holds without renewal: a holder that
	// died is replaced after it.
	leaseTTL = 15 * time.Second
)

// errSyncElsewhere is checkMark's answer while another Syncer holds the
// lease.
var errSyncElsewhere = errors.New("key sync: another process is syncing every key")

// lease is the value of the lease entry.
type lease struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// acquireLease takes the lease for this Syncer and returns its revision,
// or ok=false when another Syncer holds a live one.
func (s *Syncer) acquireLease(ctx context.Context) (rev uint64, ok bool, err error) {
	data, _ := json.Marshal(lease{Holder: s.id, Until: time.Now().Add(leaseTTL)})
	rev, err = s.b.Keys.Create(ctx, syncLease, data)
	if err == nil {
		return rev, true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return 0, false, fmt.Errorf("key sync: take the lease: %w", err)
	}
	e, err := s.b.Keys.Get(ctx, syncLease)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil // released meanwhile: next time
	} else if err != nil {
		return 0, false, fmt.Errorf("key sync: read the lease: %w", err)
	}
	var l lease
	if json.Unmarshal(e.Value(), &l) == nil && time.Now().Before(l.Until) {
		return 0, false, nil
	}
	rev, err = s.b.Keys.Update(ctx, syncLease, data, e.Revision())
	if isWrongRevision(err) {
		return 0, false, nil // taken over by another
	} else if err != nil {
		return 0, false, fmt.Errorf("key sync: take over the lease: %w", err)
	}
	return rev, true, nil
}

// holdLease renews the lease at rev every third of leaseTTL until ctx
// ends, then releases it; it calls lost (and stops) when the lease was
// taken over or cannot be renewed in time.
func (s *Syncer) holdLease(ctx context.Context, rev uint64, lost func()) {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.b.Keys.Delete(rctx, syncLease, jetstream.LastRevision(rev))
	}()
	tick := time.NewTicker(leaseTTL / 3)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		data, _ := json.Marshal(lease{Holder: s.id, Until: time.Now().Add(leaseTTL)})
		next, err := s.b.Keys.Update(ctx, syncLease, data, rev)
		switch {
		case err == nil:
			rev, renewed = next, time.Now()
		case isWrongRevision(err) || time.Since(renewed) > leaseTTL*2/3:
			s.log.Warn("key sync: lost the full sync's lease; another process takes over", "err", err)
			lost()
			return
		}
	}
}

func newSyncerID() string { return nuid.Next() }
