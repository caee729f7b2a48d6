package meter

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// SyncPolicy is when JetStream fsyncs what it stores, and so what a PubAck
// promises: with Always, an acknowledged event is on disk; with an
// Interval, a power loss (not a process crash: the kernel keeps what was
// written) can take the events acknowledged in the last Interval. NATS'
// own default is an interval of 2 minutes; Tollgate never leaves it at
// that (see DefaultSync).
type SyncPolicy struct {
	Always   bool
	Interval time.Duration
}

// DefaultSync is the policy of the embedded server unless configured:
// fsync every 100 ms, chosen by measurement (BENCHMARKS.md, "JetStream
// sync policy").
var DefaultSync = SyncPolicy{Interval: 100 * time.Millisecond}

// ParseSyncPolicy reads a sync setting: "always", or a duration such as
// "100ms". It returns an error naming what it expected.
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	if s == "always" {
		return SyncPolicy{Always: true, Interval: DefaultSync.Interval}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return SyncPolicy{}, fmt.Errorf("sync_interval must be \"always\" or a positive duration such as 100ms, not %q", s)
	}
	return SyncPolicy{Interval: d}, nil
}

// String is the policy as the configuration writes it.
func (p SyncPolicy) String() string {
	if p.Always {
		return "always"
	}
	return p.Interval.String()
}

// Embedded is the NATS server with JetStream that `tollgate serve` embeds
// when no NATS URL is set (and that tests run). Its methods are the
// server's; Stop shuts it down.
type Embedded struct {
	*server.Server
}

// Stop shuts the server down and waits for it until ctx ends (then it
// returns ctx.Err()). It is idempotent.
func (e *Embedded) Stop(ctx context.Context) error {
	e.Shutdown()
	done := make(chan struct{})
	go func() { e.WaitForShutdown(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StartEmbedded starts an in-process NATS server with JetStream, keeping its
// data under dir and syncing it by sync (zero: DefaultSync). listen is
// "host:port" to accept network clients, or "" for in-process clients only
// (connect with nats.InProcessServer). The server's warnings and errors (a
// store it cannot write, say) go to log at those levels, its notices at
// debug level; log nil keeps it silent. It returns once the server is
// ready for connections, or an error after 10 seconds.
func StartEmbedded(dir, listen string, sync SyncPolicy, log *slog.Logger) (*Embedded, error) {
	if sync == (SyncPolicy{}) {
		sync = DefaultSync
	}
	opts := &server.Options{
		ServerName:   "tollgate-embedded",
		JetStream:    true,
		StoreDir:     dir,
		NoSigs:       true,
		NoLog:        log == nil,
		SyncAlways:   sync.Always,
		SyncInterval: sync.Interval,
	}
	if listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats listen %q: %w", listen, err)
		}
		opts.Host = host
		if opts.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("embedded nats listen %q: %w", listen, err)
		}
		if opts.Port == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if log != nil {
		s.SetLogger(serverLog{log}, false, false)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after 10s")
	}
	return &Embedded{s}, nil
}

// serverLog passes the embedded server's log lines to a slog.Logger,
// tagged "nats": warnings and errors at their levels, notices, debug and
// trace lines at debug level (its start-up banner is a dozen notices).
type serverLog struct{ log *slog.Logger }

func (l serverLog) Noticef(format string, v ...any) { l.at(slog.LevelDebug, format, v) }
func (l serverLog) Warnf(format string, v ...any)   { l.at(slog.LevelWarn, format, v) }
func (l serverLog) Fatalf(format string, v ...any)  { l.at(slog.LevelError, format, v) }
func (l serverLog) Errorf(format string, v ...any)  { l.at(slog.LevelError, format, v) }
func (l serverLog) Debugf(format string, v ...any)  { l.at(slog.LevelDebug, format, v) }
func (l serverLog) Tracef(format string, v ...any)  { l.at(slog.LevelDebug, format, v) }

func (l serverLog) at(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if l.log.Enabled(ctx, level) {
		l.log.Log(ctx, level, "nats: "+fmt.Sprintf(format, v...))
	}
}
