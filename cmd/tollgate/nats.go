package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// connectNATS connects to TOLLGATE_NATS_URL or, for serve without one,
// embeds a JetStream server with its data under the data directory,
// syncing as sync says.
func (a *app) connectNATS(e env, r roles, sync meter.SyncPolicy) (jetstream.JetStream, error) {
	var err error
	switch {
	case e.NATSURL != "":
		a.nc, err = nats.Connect(e.NATSURL, nats.Name("tollgate"), nats.MaxReconnects(-1),
			nats.RetryOnFailedConnect(true), nats.ReconnectWait(500*time.Millisecond))
	case r.all():
		if a.ns, err = meter.StartEmbedded(filepath.Join(e.DataDir, "jetstream"), "", sync); err != nil {
			return nil, err
		}
		a.started("embedded NATS", 10*time.Second, a.ns.Stop)
		a.nc, err = nats.Connect("", nats.InProcessServer(a.ns))
	default:
		return nil, errors.New("TOLLGATE_NATS_URL is required: only `tollgate serve` embeds JetStream")
	}
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	// Close flushes what is buffered (acknowledgements) before it closes.
	a.started("NATS connection", 5*time.Second, func(context.Context) error { a.nc.Close(); return nil })
	return jetstream.New(a.nc)
}
