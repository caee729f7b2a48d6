package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// natsPingInterval is how often a process pings its NATS server; two
// pings unanswered, it takes the server as gone and reconnects.
const natsPingInterval = 5 * time.Second

// connectNATS connects to TOLLGATE_NATS_URL or, for serve without one,
// embeds a JetStream server with its data under the data directory,
// syncing as sync says. Given TOLLGATE_NATS_URL, it hands a store the
// embedded server left in the data directory over to that NATS, in the
// background (startHandOver).
func (a *app) connectNATS(e env, r roles, sync meter.SyncPolicy) (jetstream.JetStream, error) {
	var err error
	// Reconnect for ever, and say so: a connection given up after nats.go's
	// default 60 attempts would leave events in the spool, and the meter
	// idle, until a restart.
	asyncErrors := &repeats{every: time.Minute} // when each asynchronous error was last logged at WARN
	opts := []nats.Option{nats.Name("tollgate"), nats.MaxReconnects(-1), nats.ReconnectWait(500 * time.Millisecond),
		// A server that stops answering without closing the connection (a
		// node paused, or cut off by a partition that drops packets) is
		// left for another of TOLLGATE_NATS_URL's after natsPingInterval
		// times 2 or 3 (two pings unanswered), not nats.go's 2 minutes
		// times as many: meanwhile every gateway request waited the
		// publish timeout at its end and spooled its event (a review).
		nats.PingInterval(natsPingInterval), nats.MaxPingsOutstanding(2),
		// Nothing given to the connection while it reconnects is kept
		// for the server it reaches next (nats.go's default keeps 8 MiB):
		// a meter worker's acknowledgements would go to a usage stream
		// made again there, acknowledging its events at those sequences
		// (meter's ackGate), and a gateway's publish would wait its whole
		// timeout for a PubAck. Such a publish fails at once instead
		// (nats.ErrReconnectBufExceeded): the ack is not sent (the batch
		// is delivered again; the ledger drops it), the event is spooled.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() { // closed on purpose (shutdown): not reconnecting; ClosedHandler reports an error
				return
			}
			a.log.Warn("NATS: disconnected; reconnecting", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			url := redactURL(nc.ConnectedUrl()) // not ConnectedUrlRedacted: it leaves a token (nats://TOKEN@host)
			if e.NATSURL == "" {
				url = "in-process (the embedded server)" // nats.go names its default URL, which is not it
			}
			a.log.Info("NATS: reconnected", "url", url)
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				a.log.Error("NATS: connection closed", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// While NATS is away, nats.go repeats the same error (the
			// consumer "not active") every few seconds: once a minute each.
			level := slog.LevelDebug
			if asyncErrors.first(err.Error(), time.Now()) {
				level = slog.LevelWarn
			}
			a.log.Log(context.Background(), level, "NATS: asynchronous error (repeats within a minute are logged at DEBUG)", "err", err)
		}),
	}
	switch {
	case e.NATSURL != "":
		a.nc, err = nats.Connect(e.NATSURL, append(opts, nats.RetryOnFailedConnect(true))...)
	case r.all():
		if a.ns, err = meter.StartEmbedded(filepath.Join(e.DataDir, "jetstream"), "", sync, a.log); err != nil {
			return nil, err
		}
		a.started("embedded NATS", 10*time.Second, a.ns.Stop)
		a.nc, err = nats.Connect("", append(opts, nats.InProcessServer(a.ns))...)
	default:
		return nil, errors.New("TOLLGATE_NATS_URL is required: only `tollgate serve` embeds JetStream")
	}
	if err != nil {
		var ue *url.Error // a URL that does not parse, named whole in the error
		if errors.As(err, &ue) {
			ue.URL = redactURL(ue.URL)
		}
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	if e.NATSURL != "" && !a.nc.IsConnected() {
		// The first attempt failed: nats.go retries on its own and says
		// nothing until it connects.
		a.log.Warn("NATS: not reachable yet; retrying every 0.5 s (check TOLLGATE_NATS_URL)", "url", redactURL(e.NATSURL))
	}
	// Close flushes what is buffered (acknowledgements) before it closes.
	a.started("NATS connection", 5*time.Second, func(context.Context) error { a.nc.Close(); return nil })
	if e.NATSURL != "" {
		// A store an embedded server left here (serve before the switch
		// to this NATS) goes to this one; stopped before the connection.
		a.startHandOver(e, r)
	}
	return jetstream.New(a.nc)
}

// redactURL is raw (one or more NATS URLs, comma-separated) with any
// password replaced by "xxxxx", for the log; so is a user without a
// password, which NATS takes as a token (nats://TOKEN@host), and whatever
// comes before the host of a URL that does not parse.
func redactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		switch {
		case err != nil:
			if at := strings.LastIndex(p, "@"); at >= 0 {
				scheme, _, ok := strings.Cut(p, "://")
				if !ok {
					scheme = ""
				} else {
					scheme += "://"
				}
				parts[i] = scheme + "xxxxx" + p[at:]
			}
		case u.User == nil:
			parts[i] = u.String()
		default:
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			} else {
				u.User = url.User("xxxxx")
			}
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

// repeats says whether a message is new: not seen within every before now.
// It forgets messages older than that as it goes, so it stays small.
type repeats struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]time.Time
}

// first reports whether msg was not seen within r.every before now, and
// records now as its time if so.
func (r *repeats) first(msg string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if t, ok := r.last[msg]; ok && now.Sub(t) < r.every {
		return false
	}
	for m, t := range r.last {
		if now.Sub(t) >= r.every {
			delete(r.last, m)
		}
	}
	r.last[msg] = now
	return true
}
