package gateway_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestProviderConfigRefused pins the provider checks of Config.Validate
// that config check's tests did not reach: a base_url that is not an
// http(s) URL with a host (ftp://, a bare host, http:// alone), a name with
// a slash (which "provider/model" routes could not tell apart) and a second
// provider of a name already defined are refused, naming the provider,
// never taken (a mutation audit: each check could be dropped unnoticed).
func TestProviderConfigRefused(t *testing.T) {
	for _, c := range []struct {
		providers []gateway.ProviderConfig
		want      string
	}{
		{[]gateway.ProviderConfig{{Name: "a", Type: "openai", BaseURL: "ftp://a/v1"}}, `providers[0] (a): base_url "ftp://a/v1" is not an http(s) URL`},
		{[]gateway.ProviderConfig{{Name: "a", Type: "openai", BaseURL: "a.example.com/v1"}}, `base_url "a.example.com/v1" is not an http(s) URL`},
		{[]gateway.ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://"}}, `base_url "http://" is not an http(s) URL`},
		{[]gateway.ProviderConfig{{Name: "a/b", Type: "openai", BaseURL: "http://a/v1"}}, "providers[0]: name is required and may not contain '/'"},
		{[]gateway.ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://a/v1"}, {Name: "a", Type: "openai", BaseURL: "http://b/v1"}},
			"providers[1] (a): a provider with this name is already defined"},
	} {
		cfg := gateway.Config{Providers: c.providers, Models: []gateway.ModelConfig{{Name: "m", Provider: "a"}}}
		if err := cfg.Validate("openai"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.providers, err, c.want)
		}
	}
}

// TestDeploymentNegativeLimitsRefused: a deployment's max_concurrent and
// rpm_limit may each be 0 (no limit) but not negative; each is checked on
// its own (a mutation audit: rpm_limit's check could be dropped unnoticed).
func TestDeploymentNegativeLimitsRefused(t *testing.T) {
	for _, d := range []gateway.DeploymentConfig{{Provider: "a", MaxConcurrent: -1}, {Provider: "a", RPMLimit: -1}} {
		cfg := gateway.Config{Providers: []gateway.ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://a/v1"}},
			Models: []gateway.ModelConfig{{Name: "m", Deployments: []gateway.DeploymentConfig{d}}}}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "max_concurrent and rpm_limit may not be negative") {
			t.Errorf("%+v: %v, want it refused", d, err)
		}
	}
}

// TestMaxConnectionsMinusOneRefused: max_connections: -1, the smallest
// negative, is refused like any other, not taken for the derived default
// (a mutation audit: the check at < -1 passed the tests, which used -2).
func TestMaxConnectionsMinusOneRefused(t *testing.T) {
	cfg := gateway.Config{MaxConnections: -1, Providers: []gateway.ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://a/v1"}},
		Models: []gateway.ModelConfig{{Name: "m", Provider: "a"}}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "max_connections must be 0 (derived from the open-files limit) or more, not -1") {
		t.Fatalf("max_connections -1: %v, want it refused", err)
	}
}
