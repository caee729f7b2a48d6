package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

func (a *app) listen(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	a.listeners = append(a.listeners, srv)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("http server", "addr", addr, "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// close stops accepting requests, lets in-flight ones finish within the
// grace period and cuts off the rest (recording their events), waits for
// every usage event to be published or spooled, flushes the spool while
// NATS is there, then stops the worker and closes connections. It is safe
// on a partly started app.
func (a *app) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.grace)
	defer cancel()
	var errs []error
	for _, srv := range a.listeners {
		if err := srv.Shutdown(ctx); err != nil {
			if a.gw != nil {
				a.gw.CutOff()
			}
			_ = srv.Close()
		}
	}
	if a.gw != nil {
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.gw.Wait(wctx); err != nil {
			errs = append(errs, fmt.Errorf("publishing usage events: %w", err))
		}
		wcancel()
	}
	if a.spool != nil {
		if n, _, _ := a.spool.Stats(); n > 0 && a.nc != nil && a.nc.IsConnected() {
			fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
			js, _ := jetstream.New(a.nc)
			_, _ = a.spool.Drain(fctx, meter.NewPublisher(js, a.streamCfg, 0).Publish)
			fcancel()
		}
		if n, _, _ := a.spool.Stats(); n > 0 {
			a.log.Warn("spool: usage events stay spooled for the next start", "events", n)
		}
		if err := a.spool.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if a.cancel != nil {
		a.cancel()
		if err := a.group.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	if a.nc != nil {
		a.nc.Close()
	}
	if a.ns != nil {
		a.ns.Shutdown()
		a.ns.WaitForShutdown()
	}
	if a.store != nil {
		a.store.Close()
	}
	return errors.Join(errs...)
}
