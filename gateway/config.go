package gateway

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// ProviderConfig is one upstream provider, as the config file's
// `providers:` list gives it.
type ProviderConfig struct {
	// Name is how models and "provider/model" names refer to it, e.g. "openai".
	Name string `yaml:"name"`
	// Type is the wire protocol, a registered provider's type: "openai"
	// (OpenAI and any OpenAI-compatible API), "anthropic" (Messages API) or
	// "gemini" (Gemini API).
	Type string `yaml:"type"`
	// BaseURL is the API root including its version, e.g. https://api.openai.com/v1.
	BaseURL string `yaml:"base_url"`
	// APIKey is the upstream credential. Prefer APIKeyEnv.
	APIKey string `yaml:"api_key"`
	// APIKeyEnv names an environment variable holding the upstream credential.
	APIKeyEnv string `yaml:"api_key_env"`
	// ConnectTimeout bounds connecting and waiting for the response headers.
	// Default 30s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// StallTimeout bounds the silence between two upstream events (and
	// before the first): a stalled upstream is cut off, the client gets 504
	// (or an error event mid-stream) and the event is recorded as a
	// timeout. Default 5m, for reasoning models that think before speaking.
	StallTimeout time.Duration `yaml:"stall_timeout"`

	scrub *scrubber // what clients must not see of it
}

// ModelConfig maps a model name that clients send to a provider's model.
type ModelConfig struct {
	// Name is what clients send as "model".
	Name string `yaml:"name"`
	// Provider is a ProviderConfig.Name.
	Provider string `yaml:"provider"`
	// UpstreamModel is the model name sent to the provider. Default Name.
	UpstreamModel string `yaml:"upstream_model"`
}

// Config is the gateway's part of the configuration.
type Config struct {
	Providers []ProviderConfig `yaml:"providers"`
	Models    []ModelConfig    `yaml:"models"`
	// MaxRequestBytes caps a request body; larger ones get 413. Default 8 MiB.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// DrainTimeout bounds how long the gateway keeps reading an upstream
	// stream after its client went away, to learn the usage. Default 30s.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// MaxDrains caps the streams read on after their clients went away; past
	// it, a stream is cut off at once and its usage estimated. Default 1024.
	MaxDrains int `yaml:"max_drains"`
	// ReadTimeout bounds reading a request, headers and body, from the
	// client (a slow client cannot hold a connection open by sending
	// slowly); streaming the response is not bounded by it. Default 60s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ShutdownDrain is how long a stream still running when a shutdown's
	// grace period ends is read on, after its client got an error frame,
	// for the provider's own usage. Default 5s.
	ShutdownDrain time.Duration `yaml:"shutdown_drain"`
}

// Validate checks the configuration and fills in defaults. types are the
// provider types the gateway knows (see provider.Provider.Type); with none,
// any type is taken. Its errors name the entry and field at fault.
func (c *Config) Validate(types ...string) error {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 8 << 20
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 60 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.ShutdownDrain <= 0 {
		c.ShutdownDrain = 5 * time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.MaxDrains <= 0 {
		c.MaxDrains = 1024
	}
	names := map[string]bool{}
	for i := range c.Providers {
		p := &c.Providers[i]
		where := fmt.Sprintf("providers[%d] (%s)", i, p.Name)
		switch {
		case p.Name == "" || strings.Contains(p.Name, "/"):
			return fmt.Errorf("providers[%d]: name is required and may not contain '/'", i)
		case names[p.Name]:
			return fmt.Errorf("%s: a provider with this name is already defined", where)
		case p.Type == "":
			return fmt.Errorf("%s: type is required (one of %s)", where, strings.Join(types, ", "))
		case len(types) > 0 && !slices.Contains(types, p.Type):
			return fmt.Errorf("%s: type %q is not one of %s", where, p.Type, strings.Join(types, ", "))
		}
		names[p.Name] = true
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: base_url %q is not an http(s) URL", where, p.BaseURL)
		}
		p.BaseURL = strings.TrimRight(p.BaseURL, "/")
		if p.APIKeyEnv != "" {
			if p.APIKey = os.Getenv(p.APIKeyEnv); p.APIKey == "" {
				return fmt.Errorf("%s: api_key_env names %s, which is not set", where, p.APIKeyEnv)
			}
		}
		if p.ConnectTimeout <= 0 {
			p.ConnectTimeout = 30 * time.Second
		}
		if p.StallTimeout <= 0 {
			p.StallTimeout = 5 * time.Minute
		}
	}
	models := map[string]bool{}
	for i := range c.Models {
		m := &c.Models[i]
		switch {
		case m.Name == "":
			return fmt.Errorf("models[%d]: name is required", i)
		case models[m.Name]:
			return fmt.Errorf("models[%d] (%s): a model with this name is already defined", i, m.Name)
		case !names[m.Provider]:
			return fmt.Errorf("models[%d] (%s): provider %q is not defined under providers", i, m.Name, m.Provider)
		}
		models[m.Name] = true
		if m.UpstreamModel == "" {
			m.UpstreamModel = m.Name
		}
	}
	return nil
}
