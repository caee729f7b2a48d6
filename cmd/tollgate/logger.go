package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.uber.org/zap/zapcore"
)

// newLogger returns the JSON logger every command logs with, at level
// (TOLLGATE_LOG_LEVEL: debug, info, warn or error, any case; empty means
// info). At warn, the gateway logs only failed requests (its request line
// is WARN for upstream_error, timeout and cut_off, INFO otherwise). An unknown level is an error naming the
// accepted ones. When w is a log buffer (newLogBuffer), a line at WARN or
// above is written at once, with every line buffered before it.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("TOLLGATE_LOG_LEVEL=%q: want debug, info, warn or error", level)
		}
	}
	var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})
	if b, ok := w.(*zapcore.BufferedWriteSyncer); ok {
		h = flushAtWarn{Handler: h, buf: b}
	}
	return slog.New(h), nil
}

// Lines below WARN (a gateway's request line, one per request) wait in
// the log buffer for at most logFlushInterval, or until logBufferSize
// bytes of them are held: written one by one they cost a write system
// call each, 1 of the gateway's 7 per short stream (measured with
// /proc/PID/io under cmd/loadgen -mode short).
const (
	logFlushInterval = 100 * time.Millisecond
	logBufferSize    = 256 << 10 // bytes
)

// newLogBuffer returns w buffered (zap's BufferedWriteSyncer) for
// newLogger. Its Stop writes what it holds and ends its flushing
// goroutine; a process killed outright loses at most the last
// logFlushInterval of INFO lines (never a usage event: those are in the
// crash journal and the ledger). Its Sync writes the buffer out and no
// more: w is wrapped so that its own Sync (os.Stderr's is an fsync, or
// EINVAL on a pipe) is not called at every WARN line.
func newLogBuffer(w io.Writer) *zapcore.BufferedWriteSyncer {
	return &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(struct{ io.Writer }{w}), Size: logBufferSize, FlushInterval: logFlushInterval}
}

// flushAtWarn writes a buffered log out after each line at WARN or above,
// so that warnings and errors are never held back.
type flushAtWarn struct {
	slog.Handler
	buf *zapcore.BufferedWriteSyncer
}

func (h flushAtWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if serr := h.buf.Sync(); err == nil {
			err = serr
		}
	}
	return err
}

func (h flushAtWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushAtWarn{Handler: h.Handler.WithAttrs(attrs), buf: h.buf}
}

func (h flushAtWarn) WithGroup(name string) slog.Handler {
	return flushAtWarn{Handler: h.Handler.WithGroup(name), buf: h.buf}
}
