package main

import (
	"fmt"
	"io"
	"log/slog"
)

// newLogger returns the JSON logger every command logs with, at level
// (TOLLGATE_LOG_LEVEL: debug, info, warn or error, any case; empty means
// info). At warn, the gateway logs only failed requests (its request line
// is WARN for upstream_error, timeout and cut_off, INFO otherwise). An unknown level is an error naming the
// accepted ones.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("TOLLGATE_LOG_LEVEL=%q: want debug, info, warn or error", level)
		}
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}
