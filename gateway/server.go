// Package gateway is Tollgate's LLM-facing HTTP surface: an OpenAI-compatible
// API in front of upstream providers that taps the usage of every request
// from the stream it forwards and makes one usage event per upstream
// request durable before the response ends.
//
// The core knows HTTP, routing, streaming and metering; each upstream wire
// protocol is one provider.Provider value, given to New, which the core
// serves without naming it.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// KeyLookup authenticates customer API keys. The key cache (meter/keys)
// implements it from memory, without touching the database on the request
// path.
type KeyLookup interface {
	// LookupKey returns the state of an active key secret (who it bills,
	// its limits, and in Blocked why it may not spend now), or ok=false
	// for an unknown or revoked one.
	LookupKey(secret string) (usage.KeyState, bool)
}

// StateWatcher is implemented by a KeyLookup that applies keys' and
// customers' states as they are pushed (meter/keys.Cache): the gateway's
// spend holds count a key's charges from the moment a newer state of it
// arrives, not from its next request, which may come long after charges
// the state does not hold.
type StateWatcher interface {
	// WatchStates has key called with the key id and Version of each
	// newer key state applied, customer with the customer id and Version
	// of each newer customer state; they must not block.
	WatchStates(key, customer func(id string, version int64))
}

// EventSink receives the one usage event of each upstream request.
type EventSink interface {
	// Publish returns once the event is durable (acknowledged by JetStream
	// or in a local fsync'd spool), or an error when it could not be made
	// so. The gateway calls it before the response's last bytes.
	Publish(ctx context.Context, e *usage.Event) error
}

// JournalHealth is implemented by a Journal that can tell it cannot write
// (meter/journal: a full disk): the gateway then refuses new requests
// (503), since one begun would have no record that survives a crash.
type JournalHealth interface {
	// Failing returns the journal's write error while its writes fail,
	// nil once they succeed again. It must be cheap: it runs on every
	// request.
	Failing() error
}

// Admitter is implemented by a sink that can refuse new requests (503)
// while it cannot take more events: a full spool.
type Admitter interface {
	// Accepting returns an error saying why, while no more can be taken.
	Accepting() error
}

// Journal is the crash journal (meter/journal implements it): every
// request is begun, checkpointed while it streams and ended once its event
// is durable, so that a gateway that dies mid-request loses none of its
// usage. Its methods must not block on the disk.
type Journal interface {
	// Begin records the start of a request: its event as known then (with
	// a rough prompt estimate and the reasoning it is expected to hide)
	// and its body. The request goes upstream when it returns: the record
	// must survive the process's death by then (written, not fsync'd).
	Begin(e *usage.Event, body []byte)
	// Checkpoint records progress: output streamed since the last
	// checkpoint, the reasoning shown as text among it, the provider's
	// usage report so far (nil when none), and whether reasoning was shown
	// as text.
	Checkpoint(id string, output, reasoning string, reported *usage.Tokens, reasoningShown bool)
	// End records that the request's event is durable.
	End(id string)
	// Fail records a request's final event that could not be made durable,
	// for the next start to record.
	Fail(e *usage.Event)
	// HiddenReasoning records the averages of the reasoning each model
	// spends without showing it, in tokens by model (see Recover).
	HiddenReasoning(avg map[string]int64)
	// SpendCharges records what the gateway charged its spend-limited
	// keys and customers since their last states (JSON, for
	// Deps.SpendCharges at the next start), replacing the last record.
	SpendCharges(snapshot []byte)
}

// Deps are what a Server is built from.
type Deps struct {
	// Providers are the upstream protocols served (at least the types the
	// configuration names).
	Providers []provider.Provider
	// Keys authenticates customers.
	Keys KeyLookup
	// Sink makes usage events durable.
	Sink EventSink
	// Journal, when set, records requests in flight (see Journal).
	Journal Journal
	// Limits, when set, shares the keys' rate and concurrency counts with
	// the other gateways; without it this gateway enforces them alone.
	Limits LimitShare
	// Rates, when set, rates each request as the ledger will, to show the
	// caller its cost (see cost.go); without it no cost is shown.
	Rates Rater
	// HiddenReasoning seeds the averages of the reasoning each model hides
	// (tokens, by model) with what an earlier process journaled.
	HiddenReasoning map[string]int64
	// SpendCharges seeds the charges of spend-limited keys and customers
	// since their last states with what an earlier process journaled
	// (Journal.SpendCharges; nil: none): a restart while the meter cannot
	// write, and so no newer state comes, forgets none of them.
	SpendCharges []byte
	// Log receives the per-request lines and failures.
	Log *slog.Logger
	// Metrics, when set, registers the gateway's Prometheus series.
	Metrics prometheus.Registerer
}

// Server serves the LLM API. Create it with New; Start serves it on an
// address, Stop shuts it down.
type Server struct {
	cfg       Config
	keys      KeyLookup
	sink      EventSink
	journal   Journal
	log       *slog.Logger
	providers map[string]*provider.Provider
	// clientKeys are the providers' ClientKey, in the order of
	// Deps.Providers: customerKey tries them in that order, the same for
	// every request (not in the providers map's random order).
	clientKeys []func(*http.Request) string
	routes     *router
	// The upstream transports, used directly, not through an http.Client,
	// so that no redirect is followed (see redirected).
	client *http.Transport // HTTP/1.1 over http://, HTTP/2 or 1.1 (ALPN) over https://
	h2c    *http.Transport // cleartext HTTP/2 with prior knowledge (ProtocolH2C)
	est    *tap.Estimator
	hidden *hiddenReasoning
	limits *limiter
	spend  *spendHolds
	rates  Rater // nil: no cost shown
	// drains counts the streams being read after their clients left.
	drains *drainPool
	mu     sync.Mutex
	active map[*exchange]struct{}
	// inflight counts exchanges not yet finished (their events committed).
	inflight sync.WaitGroup
	metrics  *metrics
	// owed are the events the sink refused, offered to it again (owed.go).
	owed owed

	srv  *http.Server
	addr string
	// clients is the clients' listener, which counts their open
	// connections (set by Start).
	clients *capListener
	// handback takes back the connections streams took (see takeover);
	// streams counts the taken streams whose body has not ended, which
	// http.Server.Shutdown does not wait for, and watchers their
	// connections' watchers; stopping is set by Stop.
	handback *handback
	hangups  *hangups // nil: each taken stream's connection has a goroutine reading it
	streams  sync.WaitGroup
	watchers sync.WaitGroup
	// chains runs the HTTP/1.1 POSTs' chains (see takeovers).
	chains   workers
	stopping atomic.Bool
	taken    atomic.Int64 // streams that took their connections, ever
	polled   atomic.Int64 // of which watched by hangups
	stopOnce sync.Once
	stopErr  error
	// started is set by the first Start that listens, stopCalled by Stop:
	// a Server starts once, and never after Stop (it could not be stopped).
	started, stopCalled atomic.Bool
	// background runs the periodic work of a started server (see
	// background); stopBackground ends it and backgroundDone says it has.
	stopBackground context.CancelFunc
	backgroundDone chan struct{}
	// serving counts the goroutines serving the two listeners (the
	// clients' and handback); Stop waits for them.
	serving sync.WaitGroup
}

// Buffer sizes of an upstream HTTP/1.1 connection, in bytes (net/http's
// default: 4 KiB each). An open connection holds both for its lifetime, so
// every stream, idle or not, holds them. The write buffer takes the request
// header; the part of a body that does not fit goes to the socket directly.
// The read buffer bounded what one read from the socket took in when events
// arrive faster than they are relayed (at 1 KiB, 100 unpaced streams took
// three times as many read calls per chunk as at 4 KiB, at 2 KiB a third
// more); a readAheadConn under it now takes in up to readAhead bytes a
// read, from a buffer held only while it has bytes not yet taken.
const (
	upstreamReadBuffer  = 2 << 10
	upstreamWriteBuffer = 1 << 10
)

// An HTTP/2 upstream connection carries many requests at once: one that
// has received no frame for h2ReadIdle is pinged, and closed (failing its
// requests, as broken streams) when no answer comes within h2PingTimeout.
// h2StreamWindow, in bytes, is how much of one response the connection
// takes in before the gateway reads it (the stream's flow-control window):
// what a stream whose client reads slowly holds in memory, at most (over
// HTTP/1.1 the kernel's socket buffer holds it).
const (
	h2ReadIdle     = 30 * time.Second
	h2PingTimeout  = 15 * time.Second
	h2StreamWindow = 512 << 10
)

// newH2CTransport returns the transport of the providers whose Protocol is
// ProtocolH2C: HTTP/2 only, without TLS. net/http speaks cleartext HTTP/2
// with prior knowledge only when HTTP/1 is off (with both, an http:// URL
// gets HTTP/1.1), hence a transport of its own. Requests are streams on
// shared connections: a new connection opens when those open have as many
// streams as the server allows (SETTINGS_MAX_CONCURRENT_STREAMS).
func newH2CTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr.Protocols = &p
	tr.HTTP2 = &http.HTTP2Config{SendPingTimeout: h2ReadIdle, PingTimeout: h2PingTimeout, MaxReceiveBufferPerStream: h2StreamWindow}
	tr.MaxIdleConnsPerHost = 1024
	tr.MaxResponseHeaderBytes = maxUpstreamHeader
	tr.DialContext = dialReadAhead(tr.DialContext)
	return tr
}

// maxUpstreamHeader bounds an upstream response's header, in bytes: the
// providers' are a few KiB. net/http's default, 10 MiB, let 30 requests at
// once to an upstream sending endless headers take the gateway from 104
// to 315 MB (a resource review); past the bound the request fails 502 as
// the upstream's ("server response headers exceeded …").
const maxUpstreamHeader = 1 << 20

// clientFor returns the transport that reaches provider p.
func (s *Server) clientFor(p *ProviderConfig) *http.Transport {
	if p.Protocol == ProtocolH2C {
		return s.h2c
	}
	return s.client
}

// New returns a Server for cfg, which it validates (see Config.Validate)
// against the providers registered. It returns an error for an invalid
// configuration.
func New(cfg Config, d Deps) (*Server, error) {
	providers := map[string]*provider.Provider{}
	var types []string
	for i := range d.Providers {
		p := &d.Providers[i]
		providers[p.Type] = p
		types = append(types, p.Type)
	}
	if err := cfg.Validate(types...); err != nil {
		return nil, err
	}
	if d.Keys == nil || d.Sink == nil {
		return nil, errors.New("gateway: Keys and Sink are required")
	}
	if d.Journal == nil {
		d.Journal = noJournal{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	tr.MaxResponseHeaderBytes = maxUpstreamHeader
	tr.ForceAttemptHTTP2 = true
	tr.ReadBufferSize, tr.WriteBufferSize = upstreamReadBuffer, upstreamWriteBuffer
	tr.DialContext = dialReadAhead(tr.DialContext)
	est, err := tap.NewEstimator()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, keys: d.Keys, sink: d.Sink, journal: d.Journal, log: d.Log, providers: providers,
		routes: newRouter(cfg), client: tr, h2c: newH2CTransport(), est: est, hidden: newHiddenReasoning(), limits: newLimiter(d.Limits), spend: newSpendHolds(), rates: d.Rates,
		drains: newDrainPool(cfg.MaxDrains), active: map[*exchange]struct{}{}}
	for i := range d.Providers {
		if ck := d.Providers[i].ClientKey; ck != nil && providers[d.Providers[i].Type] == &d.Providers[i] {
			s.clientKeys = append(s.clientKeys, ck)
		}
	}
	if d.Metrics != nil {
		s.metrics = newMetrics(cfg, d.Metrics)
		s.registerOwed(d.Metrics)
		s.registerResting(d.Metrics)
	}
	s.hidden.seed(d.HiddenReasoning)
	s.spend.seed(d.SpendCharges)
	if w, ok := d.Keys.(StateWatcher); ok {
		w.WatchStates(s.spend.arrived(s.spend.keys), s.spend.arrived(s.spend.customers))
	}
	return s, nil
}

// Start serves h (nil: Handler()) on addr, "host:port" (port 0 picks one),
// and returns once it is listening. The listener holds at most
// ConnectionCap(cfg) client connections at once (at the cap, a new one
// takes the place of the one unused longest: closeOldest), bounds reading a request
// (ReadTimeout, and 10s for its headers) and keep-alive idleness
// (IdleTimeout); responses stream unbounded. A Server starts once: Start
// returns an error when it was started already, or stopped (a Stop before
// Start uses the Server up), and when addr cannot be listened on (then it
// may be started again).
func (s *Server) Start(addr string, h http.Handler) error {
	if s.stopCalled.Load() {
		return errors.New("gateway: Start after Stop: a stopped server does not start again")
	}
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("gateway: started already")
	}
	if h == nil {
		h = s.Handler()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.started.Store(false)
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	s.addr = ln.Addr().String()
	maxConns := ConnectionCap(s.cfg)
	s.clients = limitListener(ln, maxConns)
	ln = s.clients
	s.log.Info("gateway: client connections capped", "max_connections", maxConns)
	s.handback = newHandback(ln.Addr(), s.cfg.IdleTimeout)
	if pollHangups {
		if s.hangups, err = newHangups(func(t *takeover, hungUp bool) {
			var err error
			if hungUp {
				err = errClientHungUp
			}
			t.watched(nil, err)
		}); err != nil {
			s.log.Debug("gateway: no hang-up poller; a goroutine watches each taken stream", "err", err)
			s.hangups = nil
		}
	}
	s.srv = &http.Server{Handler: s.takeovers(h), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: s.cfg.ReadTimeout,
		IdleTimeout: s.cfg.IdleTimeout, ConnState: connState, ConnContext: withClientConn, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	for _, l := range []net.Listener{ln, s.handback} {
		s.serving.Go(func() {
			if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("gateway: http server", "addr", s.addr, "err", err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopBackground, s.backgroundDone = cancel, make(chan struct{})
	go func() {
		defer close(s.backgroundDone)
		s.background(ctx)
	}()
	return nil
}

// background publishes every key's limit counts to the other gateways
// every shareInterval, offers the events the sink refused to it again
// (republishOwed), and journals the hidden reasoning averages and the
// spend charges every few seconds while they change, and at ctx's end,
// until ctx ends.
func (s *Server) background(ctx context.Context) {
	t := time.NewTicker(shareInterval)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			if avg := s.hidden.snapshot(); avg != nil {
				s.journal.HiddenReasoning(avg)
			}
			if b := s.spend.snapshot(); b != nil {
				s.journal.SpendCharges(b)
			}
			if s.owed.len() > 0 { // a last try; what is left stays in the crash journal
				last, cancel := context.WithTimeout(context.Background(), owedStopBudget)
				if n := s.republishOwed(last); n > 0 {
					s.log.Error("shutdown: usage events still owed; the crash journal keeps them for the next start", "events", n)
				}
				cancel()
			}
			return
		case <-t.C:
		}
		if s.owed.len() > 0 {
			s.republishOwed(ctx)
		}
		if share := s.limits.share; share != nil {
			if counts := s.limits.snapshot(); len(counts) > 0 {
				share.Publish(counts)
			}
		}
		if tick%5 == 0 {
			if avg := s.hidden.snapshot(); avg != nil {
				s.journal.HiddenReasoning(avg)
			}
			if b := s.spend.snapshot(); b != nil {
				s.journal.SpendCharges(b)
			}
		}
	}
}

// Addr is the address Start bound.
func (s *Server) Addr() string { return s.addr }

// Stop shuts the server down: it stops accepting, lets requests in flight
// finish until ctx ends (the grace period), then cuts off those still
// running (an error frame in their protocol, their upstream read on for
// ShutdownDrain to learn its usage) and waits for them. Every request's
// usage event is durable when Stop returns, and the upstream connections
// left idle are closed. It returns ctx.Err() when the grace period ran
// out, else nil; it is idempotent and safe on a server never started.
func (s *Server) Stop(ctx context.Context) error {
	s.stopCalled.Store(true)
	s.stopOnce.Do(func() {
		if s.srv == nil {
			return
		}
		s.stopping.Store(true)
		s.srv.SetKeepAlivesEnabled(false)
		err := s.srv.Shutdown(ctx)
		if err == nil {
			err = waitUntil(ctx, &s.streams) // the streams that took their connections
		}
		if err != nil {
			s.stopErr = err
			n := s.CutOff()
			s.log.Warn("shutdown grace period over: requests cut off", "requests", n, "drain", s.cfg.ShutdownDrain.String())
			done := make(chan struct{})
			go func() { s.inflight.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(s.cfg.ShutdownDrain + 2*time.Second):
			}
			_ = s.srv.Close()
		}
		// Every exchange commits its event as it ends; one that cannot
		// (its sink hung) is left to the crash journal after a bound.
		done := make(chan struct{})
		go func() { s.inflight.Wait(); s.streams.Wait(); s.watchers.Wait(); close(done) }()
		select {
		case <-done:
			if s.hangups != nil {
				s.hangups.stop()
			}
			s.chains.stop()
			s.chains.wait()
		case <-time.After(s.cfg.ShutdownDrain + 30*time.Second):
			s.log.Error("shutdown: requests still unfinished; the crash journal keeps them for the next start")
			s.chains.stop() // the unfinished chains' goroutines end with them
		}
		s.stopBackground()
		<-s.backgroundDone
		s.serving.Wait() // Serve returns once Shutdown or Close has closed its listener
		// The upstream connections the requests left idle (up to 1,024 a
		// host, two goroutines each) close now, not at the transports'
		// idle timeout after Stop returned.
		s.client.CloseIdleConnections()
		s.h2c.CloseIdleConnections()
	})
	return s.stopErr
}

// waitUntil waits for wg, or returns ctx's error when ctx ends first.
func waitUntil(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CutOff ends every request in flight now, as Stop does when its grace
// period runs out: the client gets an error in its protocol, the upstream
// is read on for ShutdownDrain for its usage, and the event records
// cut_off. It returns how many it cut off.
func (s *Server) CutOff() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Each at once: a stream whose client stopped reading waits up to
	// cutOffWriteWait for its write, and must not hold the others' cut-off.
	var wg sync.WaitGroup
	for x := range s.active {
		wg.Go(func() { x.cutOff(s.cfg.ShutdownDrain) })
	}
	wg.Wait()
	return len(s.active)
}

// noJournal journals nothing.
type noJournal struct{}

func (noJournal) Begin(*usage.Event, []byte)                             {}
func (noJournal) Checkpoint(string, string, string, *usage.Tokens, bool) {}
func (noJournal) End(string)                                             {}
func (noJournal) Fail(*usage.Event)                                      {}
func (noJournal) HiddenReasoning(map[string]int64)                       {}
func (noJournal) SpendCharges([]byte)                                    {}
