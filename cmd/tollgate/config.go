package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter"
)

// fileConfig is the YAML configuration file (--config): providers and models
// for the gateway, and optional seed prices for the ledger.
type fileConfig struct {
	gateway.Config `yaml:",inline"`
	// Prices are price versions ensured at start-up: added when missing,
	// left alone when present and identical, refused when they differ.
	Prices []ledger.PriceInput `yaml:"prices"`
	// Meter configures the usage stream, the meter worker and the spool.
	Meter meter.Config `yaml:"meter"`
}

// env is the environment's part of the configuration.
type env struct {
	DatabaseURL string // TOLLGATE_DATABASE_URL
	NATSURL     string // TOLLGATE_NATS_URL; empty: serve embeds JetStream
	AdminToken  string // TOLLGATE_ADMIN_TOKEN
	Listen      string // TOLLGATE_LISTEN, default :8080
	AdminListen string // TOLLGATE_ADMIN_LISTEN, default :8081
	DataDir     string // TOLLGATE_DATA_DIR, default ./tollgate-data
	// ShutdownGrace is how long in-flight requests may run after SIGTERM
	// before they are cut off (TOLLGATE_SHUTDOWN_GRACE, default 30s).
	ShutdownGrace time.Duration
	// Pprof serves net/http/pprof under /debug/pprof/ on the admin listener
	// (TOLLGATE_PPROF=1 or true; off by default: profiles reveal request data).
	Pprof bool
	// handOverRetry is the first and the longest wait between attempts of
	// a failed embedded store hand-over (zero: 5 s and 1 min); tests
	// shorten it. No variable sets it.
	handOverRetry [2]time.Duration
	// dlqRetry is the first and the longest wait between attempts to make
	// the dead-letter stream for the admin API after its start failed to
	// (zero: 1 s and 30 s); tests change it. No variable sets it.
	dlqRetry [2]time.Duration
	// keyLoadWait bounds how long a gateway's start waits for the key
	// buckets' first load while NATS is connected (zero: 10 s); tests
	// change it. No variable sets it.
	keyLoadWait time.Duration
}

// envError is a variable of the environment with a value the process
// cannot use: like a bad TOLLGATE_LOG_LEVEL, it stops the command before it
// does anything, with exit code 2 (exitUsage).
type envError struct{ msg string }

func (e *envError) Error() string { return e.msg }

// loadEnv reads the environment's part of the configuration. A value that
// cannot be used is an *envError naming the variable and what it wants,
// never replaced by the default without a word: TOLLGATE_SHUTDOWN_GRACE
// must be a Go duration of 0 or more ("30s", "1m30s"), TOLLGATE_PPROF a
// boolean as strconv.ParseBool reads it (1, t, true, 0, f, false, any case).
func loadEnv() (env, error) {
	get := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	e := env{
		DatabaseURL: get("TOLLGATE_DATABASE_URL", ledger.DefaultDatabaseURL),
		NATSURL:     os.Getenv("TOLLGATE_NATS_URL"),
		AdminToken:  os.Getenv("TOLLGATE_ADMIN_TOKEN"),
		Listen:      get("TOLLGATE_LISTEN", ":8080"),
		AdminListen: get("TOLLGATE_ADMIN_LISTEN", ":8081"),
		DataDir:     get("TOLLGATE_DATA_DIR", "./tollgate-data"),
	}
	var err error
	if e.ShutdownGrace, err = shutdownGrace(os.Getenv("TOLLGATE_SHUTDOWN_GRACE")); err != nil {
		return env{}, err
	}
	if e.Pprof, err = pprofOn(os.Getenv("TOLLGATE_PPROF")); err != nil {
		return env{}, err
	}
	return e, nil
}

// shutdownGrace reads TOLLGATE_SHUTDOWN_GRACE's value v: 30s when empty,
// else a Go duration of 0 or more, or an *envError.
func shutdownGrace(v string) (time.Duration, error) {
	if v == "" {
		return 30 * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, &envError{fmt.Sprintf("TOLLGATE_SHUTDOWN_GRACE=%q: want a duration of 0 or more, such as 30s or 1m30s", v)}
	}
	return d, nil
}

// pprofOn reads TOLLGATE_PPROF's value v: off when empty, else a boolean
// as strconv.ParseBool reads it, or an *envError.
func pprofOn(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, &envError{fmt.Sprintf("TOLLGATE_PPROF=%q: want 1 or true (on), 0 or false (off)", v)}
	}
	return on, nil
}

// loadConfig reads and validates the config file and fills in defaults.
// An empty file is not valid; a file with problems is a *configError
// listing every one, each naming its setting and line (config_check_validate.go).
func loadConfig(path string) (*fileConfig, error) {
	b, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	return parseConfig(path, b, providerTypes())
}
