package main

import (
	"os"
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
	// (TOLLGATE_PPROF=1; off by default: profiles reveal request data).
	Pprof bool
}

func loadEnv() env {
	get := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	return env{
		DatabaseURL: get("TOLLGATE_DATABASE_URL", ledger.DefaultDatabaseURL),
		NATSURL:     os.Getenv("TOLLGATE_NATS_URL"),
		AdminToken:  os.Getenv("TOLLGATE_ADMIN_TOKEN"),
		Listen:      get("TOLLGATE_LISTEN", ":8080"),
		AdminListen: get("TOLLGATE_ADMIN_LISTEN", ":8081"),
		DataDir:     get("TOLLGATE_DATA_DIR", "./tollgate-data"),
		ShutdownGrace: func() time.Duration {
			d, err := time.ParseDuration(get("TOLLGATE_SHUTDOWN_GRACE", "30s"))
			if err != nil || d < 0 {
				return 30 * time.Second
			}
			return d
		}(),
		Pprof: os.Getenv("TOLLGATE_PPROF") == "1",
	}
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
