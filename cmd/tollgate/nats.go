package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter"
)

// connectNATS connects to TOLLGATE_NATS_URL or, for serve without one,
// embeds a JetStream server with its data under the data directory.
func (a *app) connectNATS(e env, r roles) (jetstream.JetStream, error) {
	var err error
	switch {
	case e.NATSURL != "":
		a.nc, err = nats.Connect(e.NATSURL, nats.Name("tollgate"), nats.MaxReconnects(-1),
			nats.RetryOnFailedConnect(true), nats.ReconnectWait(500*time.Millisecond))
	case r.all():
		if a.ns, err = meter.StartEmbedded(filepath.Join(e.DataDir, "jetstream"), ""); err != nil {
			return nil, err
		}
		a.nc, err = nats.Connect("", nats.InProcessServer(a.ns))
	default:
		return nil, errors.New("TOLLGATE_NATS_URL is required: only `tollgate serve` embeds JetStream")
	}
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return jetstream.New(a.nc)
}

// runWorker runs the meter worker until ctx ends, setting it up again
// (with backoff) while NATS is unreachable.
func runWorker(ctx context.Context, js jetstream.JetStream, store *ledger.Store, wc meter.WorkerConfig, log *slog.Logger) error {
	for backoff := 500 * time.Millisecond; ; backoff = min(backoff*2, 10*time.Second) {
		_, err := meter.EnsureStream(ctx, js, wc.Stream)
		var w *meter.Worker
		if err == nil {
			w, err = meter.NewWorker(ctx, js, store, wc)
		}
		if err == nil {
			err = w.Run(ctx)
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("meter worker waiting for NATS", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}
