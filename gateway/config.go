package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
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
	// RequestTimeout bounds a whole upstream request, from the client's
	// request to the answer's end (the wait for its headers too), however
	// busy the upstream keeps it: an upstream that sends keep-alive
	// comments, blank lines or output without end is cut off there as it
	// is at a stall (504 before the first event, an error event
	// mid-stream; the event a timeout billing what was relayed). Default 1h.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// Protocol is how an http:// BaseURL is reached: "" (the default) is
	// HTTP/1.1, one connection per open request; ProtocolH2C is HTTP/2
	// over cleartext with prior knowledge (h2c, RFC 9113 section 3.3), every
	// request a stream multiplexed on a few connections, for upstreams
	// that serve it (vLLM behind an h2c-capable proxy, Envoy, an internal
	// gateway). An https:// BaseURL negotiates HTTP/2 or HTTP/1.1 by
	// itself (ALPN), so h2c is refused there.
	Protocol string `yaml:"protocol"`
	// PrefixRoutes says which "provider/model" names a client may send
	// that the model table does not hold: PrefixPriced (the default) serves
	// one only when its model has a price in force, or a custom price for
	// the key's customer (else 402 unpriced_model, before any upstream
	// call), since the client chooses the name and every spelling the
	// provider accepts (a dated snapshot, another case) would otherwise be
	// stored unpriced, at cost 0; PrefixAll serves any such name, stored
	// unpriced until a price is added and the period re-rated; PrefixNone
	// serves the table's models alone (404 for any other name).
	PrefixRoutes string `yaml:"prefix_routes"`

	scrub *scrubber // what clients must not see of it
}

// ProviderConfig.PrefixRoutes's values.
const (
	PrefixPriced = "priced"
	PrefixAll    = "all"
	PrefixNone   = "none"
)

// ProtocolH2C is ProviderConfig.Protocol's value for cleartext HTTP/2 with
// prior knowledge.
const ProtocolH2C = "h2c"

// ModelConfig maps a model name that clients send to where it is served:
// one provider's model (Provider, UpstreamModel), or several Deployments
// chosen by weight, with Fallbacks to other models when all of them fail.
type ModelConfig struct {
	// Name is what clients send as "model".
	Name string `yaml:"name"`
	// Provider is a ProviderConfig.Name: the single-deployment form. Give
	// it or Deployments, not both.
	Provider string `yaml:"provider"`
	// UpstreamModel is the model name sent to the provider. Default Name.
	UpstreamModel string `yaml:"upstream_model"`
	// Deployments are the places the model is served, chosen by weight
	// among those not cooling down; a request that fails on one before its
	// first byte reached the client is retried on the next (see
	// RetryConfig). After Validate it holds at least one deployment (the
	// single-deployment form becomes one of weight 1).
	Deployments []DeploymentConfig `yaml:"deployments"`
	// Fallbacks are other models of the table, tried in order once every
	// deployment of this one has failed, within the same retry budget. An
	// attempt on a fallback is recorded and priced as the fallback model.
	Fallbacks []string `yaml:"fallbacks"`
}

// DeploymentConfig is one deployment of a model: a provider and the
// model's name there, with its share of the traffic.
type DeploymentConfig struct {
	// Name identifies the deployment on usage events (their deployment)
	// and in the usage API's group_by=deployment. Default
	// "provider/upstream_model"; it must be unique within the model.
	Name string `yaml:"name"`
	// Provider is a ProviderConfig.Name.
	Provider string `yaml:"provider"`
	// UpstreamModel is the model name sent to the provider. Default the
	// model's UpstreamModel, else its Name.
	UpstreamModel string `yaml:"upstream_model"`
	// Weight is the deployment's share of the model's requests, relative
	// to the others' weights (an integer ≥ 1). Default 1.
	Weight int `yaml:"weight"`
	// MaxConcurrent, when positive, caps the requests open on this
	// deployment at once, on each gateway; a deployment at its cap is
	// skipped as if it were cooling down.
	MaxConcurrent int `yaml:"max_concurrent"`
	// RPMLimit, when positive, caps the requests sent to this deployment
	// per minute (a sliding minute), on each gateway; a deployment over it
	// is skipped as if it were cooling down.
	RPMLimit int `yaml:"rpm_limit"`
}

// RetryConfig bounds failover: which attempts a request gets, and how
// long a failed deployment rests.
type RetryConfig struct {
	// MaxAttempts is the most upstream attempts one client request gets,
	// the first included. Default 3; 1 turns failover off.
	MaxAttempts int `yaml:"max_attempts"`
	// Budget is the time after which no new attempt starts, counted from
	// the request's arrival. Default 60s: twice the default
	// connect_timeout, so that a deployment that sends no headers (a hung
	// upstream) is followed by another attempt; at 30s, equal to it, the
	// client got the hung deployment's 504 and never the next one.
	Budget time.Duration `yaml:"budget"`
	// Cooldown is how long a deployment that failed (a connect error, a
	// 429, a 5xx, or a stream that broke before its first byte) is passed
	// over; it doubles with each consecutive failure up to MaxCooldown,
	// and an upstream's Retry-After, when longer, wins. Default 5s.
	Cooldown time.Duration `yaml:"cooldown"`
	// MaxCooldown caps the cool-down. Default 5m.
	MaxCooldown time.Duration `yaml:"max_cooldown"`
}

// Config is the gateway's part of the configuration.
type Config struct {
	// Providers are the upstreams, each by name (at least one).
	Providers []ProviderConfig `yaml:"providers"`
	// Models are the names clients ask for, each served by a provider's
	// deployments (and fallbacks), in the order given.
	Models []ModelConfig `yaml:"models"`
	// Retry bounds failover between a model's deployments and fallbacks.
	Retry RetryConfig `yaml:"retry"`
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
	// WriteTimeout bounds each write of a response to the client: a client
	// that does not take the next bytes within it (it stopped reading, and
	// the connection's buffers are full) is taken as gone, as if it had
	// disconnected: the upstream is read on for its usage (DrainTimeout),
	// and the connection is closed. A stream may last any time while its
	// client reads. Default 60s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections caps the client connections the gateway's listener
	// holds at once; past it, a new connection waits in the kernel's accept
	// queue until one closes. It keeps clients from taking every file
	// descriptor of the process: JetStream's store, Postgres, the journal
	// and the spool need theirs (out of descriptors, the embedded
	// JetStream's store fails until a restart). Default 0: derived from the
	// process's RLIMIT_NOFILE (see ConnectionCap).
	MaxConnections int `yaml:"max_connections"`
	// ShutdownDrain is how long a stream still running when a shutdown's
	// grace period ends is read on, after its client got an error frame,
	// for the provider's own usage. Default 5s.
	ShutdownDrain time.Duration `yaml:"shutdown_drain"`
}

// Validate checks the configuration and fills in defaults. types are the
// provider types the gateway knows (see provider.Provider.Type); with none,
// any type is taken. Its errors name the entry and field at fault: one
// line (errors.Join) for each negative size or duration, then the first
// problem of the providers and models, if any.
func (c *Config) Validate(types ...string) error {
	errs := c.negativeSettings()
	c.fillDefaults()
	if err := c.validateEntries(types); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// negativeSettings returns an error for each size, count or duration
// below 0: 0 (or absent) is each setting's default, and a negative value
// is a mistake, taken silently for the default before.
func (c *Config) negativeSettings() []error {
	var errs []error
	for _, n := range []struct {
		name string
		v    int64
	}{{"max_request_bytes", c.MaxRequestBytes}, {"max_drains", int64(c.MaxDrains)}, {"retry.max_attempts", int64(c.Retry.MaxAttempts)}} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be 0 (its default) or more, not %d", n.name, n.v))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read_timeout", c.ReadTimeout}, {"idle_timeout", c.IdleTimeout}, {"write_timeout", c.WriteTimeout},
		{"shutdown_drain", c.ShutdownDrain}, {"drain_timeout", c.DrainTimeout}, {"retry.budget", c.Retry.Budget},
		{"retry.cooldown", c.Retry.Cooldown}, {"retry.max_cooldown", c.Retry.MaxCooldown}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be 0 (its default) or more, not %s", d.name, d.v))
		}
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max_connections must be 0 (derived from the open-files limit) or more, not %d", c.MaxConnections))
	}
	return errs
}

// fillDefaults sets each size, count and duration at 0 or below to its
// default.
func (c *Config) fillDefaults() {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 8 << 20
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 60 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 60 * time.Second
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
	if c.Retry.MaxAttempts <= 0 {
		c.Retry.MaxAttempts = 3
	}
	if c.Retry.Budget <= 0 {
		c.Retry.Budget = 60 * time.Second
	}
	if c.Retry.Cooldown <= 0 {
		c.Retry.Cooldown = 5 * time.Second
	}
	if c.Retry.MaxCooldown <= 0 {
		c.Retry.MaxCooldown = 5 * time.Minute
	}
}

// validateEntries checks the providers and models, fills in their
// defaults, and returns the first problem.
func (c *Config) validateEntries(types []string) error {
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
		switch {
		case p.Protocol != "" && p.Protocol != ProtocolH2C:
			return fmt.Errorf("%s: protocol %q is not known: give h2c (cleartext HTTP/2 with prior knowledge) or leave it out (HTTP/1.1, or HTTP/2 negotiated over https)", where, p.Protocol)
		case p.Protocol == ProtocolH2C && u.Scheme != "http":
			return fmt.Errorf("%s: protocol h2c needs an http:// base_url; over https:// HTTP/2 is negotiated by itself, so leave protocol out", where)
		}
		switch p.PrefixRoutes {
		case "":
			p.PrefixRoutes = PrefixPriced
		case PrefixPriced, PrefixAll, PrefixNone:
		default:
			return fmt.Errorf("%s: prefix_routes %q is not known: give priced (the default: \"%s/model\" names with a price in force), all, or none", where, p.PrefixRoutes, p.Name)
		}
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
		if p.RequestTimeout <= 0 {
			p.RequestTimeout = time.Hour
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
		}
		models[m.Name] = true
		if err := m.validateDeployments(names); err != nil {
			return fmt.Errorf("models[%d] (%s): %w", i, m.Name, err)
		}
	}
	for i, m := range c.Models {
		for j, f := range m.Fallbacks {
			if !models[f] || f == m.Name {
				return fmt.Errorf("models[%d] (%s): fallbacks[%d]: %q is not another model defined under models", i, m.Name, j, f)
			}
		}
	}
	return nil
}

// validateDeployments turns the single-deployment form into one
// deployment, checks each against the providers defined (names) and fills
// in their defaults.
func (m *ModelConfig) validateDeployments(names map[string]bool) error {
	switch {
	case len(m.Deployments) == 0 && m.Provider == "":
		return errors.New("provider (or deployments) is required")
	case len(m.Deployments) > 0 && m.Provider != "" && (len(m.Deployments) > 1 || m.Deployments[0].Provider != m.Provider):
		return errors.New("give provider or deployments, not both") // one deployment of provider: validated before
	case len(m.Deployments) == 0:
		m.Deployments = []DeploymentConfig{{Provider: m.Provider, UpstreamModel: m.UpstreamModel}}
	}
	if m.UpstreamModel == "" {
		m.UpstreamModel = m.Name
	}
	seen := map[string]bool{}
	for j := range m.Deployments {
		d := &m.Deployments[j]
		if d.UpstreamModel == "" {
			d.UpstreamModel = m.UpstreamModel
		}
		if d.Name == "" {
			d.Name = d.Provider + "/" + d.UpstreamModel
		}
		if d.Weight == 0 {
			d.Weight = 1
		}
		switch {
		case !names[d.Provider]:
			return fmt.Errorf("deployments[%d]: provider %q is not defined under providers", j, d.Provider)
		case seen[d.Name]:
			return fmt.Errorf("deployments[%d]: a deployment named %q is already defined for this model (name them apart)", j, d.Name)
		case d.Weight < 0:
			return fmt.Errorf("deployments[%d] (%s): weight must be a positive integer, got %d", j, d.Name, d.Weight)
		case d.MaxConcurrent < 0 || d.RPMLimit < 0:
			return fmt.Errorf("deployments[%d] (%s): max_concurrent and rpm_limit may not be negative", j, d.Name)
		}
		if err := usage.CheckString(d.Name, usage.MaxDeploymentLen); err != nil {
			return fmt.Errorf("deployments[%d]: name: %w", j, err)
		}
		seen[d.Name] = true
	}
	return nil
}
