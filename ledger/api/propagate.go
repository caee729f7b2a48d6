package api

import (
	"context"
	"net/http"
	"time"
)

// KeySync publishes key changes to the gateways (meter/keys.Syncer).
type KeySync interface {
	// Wait returns once the key outbox change seq is published, or ctx's
	// error.
	Wait(ctx context.Context, seq int64) error
}

// propagationTimeout bounds how long a key's creation, change or
// revocation waits for its publication to the gateways.
const propagationTimeout = 2 * time.Second

// PropagationHeader is on the answer to a key's creation, change or
// revocation: "done" once it is published to the gateways; "pending" when
// it could not be within propagationTimeout (NATS unreachable, say): the
// change is committed and goes out once it can; a new key works
// meanwhile, being checked against the ledger, but a revocation or a limit
// waits for it; "off" when this admin API publishes nothing (it runs
// without NATS): a meter's key syncer publishes the change from the
// ledger's key outbox (within milliseconds while a meter runs).
const PropagationHeader = "Tollgate-Propagation"

// SetKeySync makes key changes wait for their publication to the gateways
// before they are answered, so that a key works (or stops working) on
// every gateway once the call returns.
func (a *Admin) SetKeySync(s KeySync) { a.sync = s }

// propagate waits for the key outbox change seq to reach the gateways.
func (a *Admin) propagate(w http.ResponseWriter, r *http.Request, seq int64) {
	if seq == 0 {
		return
	}
	if a.sync == nil {
		w.Header().Set(PropagationHeader, "off")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), propagationTimeout)
	defer cancel()
	if err := a.sync.Wait(ctx, seq); err != nil {
		a.log.Warn("admin api: key change not yet published to the gateways", "path", r.URL.Path, "err", err)
		w.Header().Set(PropagationHeader, "pending")
		return
	}
	w.Header().Set(PropagationHeader, "done")
}
