package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestDeploymentHealthAndLimits(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newDeployment(DeploymentConfig{Name: "d", Weight: 1, MaxConcurrent: 1, RPMLimit: 2}, &ProviderConfig{})
	d.now = func() time.Time { return now }
	rc := RetryConfig{Cooldown: time.Second, MaxCooldown: 4 * time.Second}

	d.acquire()
	if d.available() {
		t.Fatal("available at max_concurrent")
	}
	d.release(outcomeOK, 0, rc)
	d.acquire()
	d.release(outcomeNeutral, 0, rc)
	if d.available() {
		t.Fatal("available with 2 requests in the minute at rpm_limit 2")
	}
	now = now.Add(61 * time.Second)
	if !d.available() {
		t.Fatal("not available a minute later")
	}
	// Failures in a row: 1s, 2s, 4s, then capped at 4s; Retry-After wins when longer.
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		d.acquire()
		d.release(outcomeFailed, 0, rc)
		if got := d.availableAt().Sub(now); got != want {
			t.Fatalf("failure %d: rests %v, want %v", i+1, got, want)
		}
		now = now.Add(want)
	}
	d.acquire()
	d.release(outcomeFailed, 30*time.Second, rc)
	if got := d.availableAt().Sub(now); got != 30*time.Second {
		t.Fatalf("with Retry-After 30s: rests %v", got)
	}
	now = now.Add(30 * time.Second)
	d.acquire()
	d.release(outcomeOK, 0, rc)
	d.acquire()
	d.release(outcomeFailed, 0, rc)
	if got := d.availableAt().Sub(now); got != time.Second {
		t.Fatalf("after a success the run starts over: rests %v", got)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"-3"}}, 0},
		{http.Header{"Retry-After": {"NaN"}}, 0},
		{http.Header{"Retry-After": {"1e9"}}, 24 * time.Hour},
		{http.Header{"Retry-After-Ms": {"2500"}, "Retry-After": {"1"}}, 2500 * time.Millisecond},
		{http.Header{}, 0},
	} {
		if got := retryAfter(c.h, now); got != c.want {
			t.Errorf("%v: %v, want %v", c.h, got, c.want)
		}
	}
}

func TestPlanOrder(t *testing.T) {
	cfg := Config{Providers: []ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://a/v1"}, {Name: "b", Type: "openai", BaseURL: "http://b/v1"},
		{Name: "c", Type: "anthropic", BaseURL: "http://c/v1"}},
		Models: []ModelConfig{
			{Name: "m", Deployments: []DeploymentConfig{{Provider: "a"}, {Provider: "b"}}, Fallbacks: []string{"f", "m2"}},
			{Name: "f", Provider: "c", Fallbacks: []string{"m"}},
			{Name: "m2", Provider: "a", UpstreamModel: "other"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := newRouter(cfg)
	rt, _ := r.resolve("m")
	rc := RetryConfig{Cooldown: time.Hour, MaxCooldown: time.Hour}
	rt.deployments[0].acquire()
	rt.deployments[0].release(outcomeFailed, 0, rc) // a/m rests
	var names []string
	all, _ := r.plan(rt, nil)
	for _, a := range all {
		names = append(names, a.model+":"+a.dep.name)
	}
	want := "m:b/m f:c/f m2:a/other m:a/m" // the resting one last; f's fallback to m not again
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("plan %s, want %s", got, want)
	}
	only, _ := r.plan(rt, func(_ string, d *deployment) bool { return d.provider.Type == "anthropic" })
	if len(only) != 1 || only[0].dep.name != "c/f" {
		t.Fatalf("filtered plan %v", only)
	}
	// "provider/model" naming a deployment of the table goes to it alone, priced as the table's model.
	if rt, err := r.resolve("b/m"); err != nil || rt.model != "m" || len(rt.deployments) != 1 || rt.deployments[0].name != "b/m" {
		t.Fatalf("b/m: %+v, %v", rt, err)
	}
}

func TestDeploymentsConfig(t *testing.T) {
	base := func() Config {
		return Config{Providers: []ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://a/v1"}}}
	}
	for _, c := range []struct {
		m    []ModelConfig
		want string
	}{
		{[]ModelConfig{{Name: "m"}}, "provider (or deployments) is required"},
		{[]ModelConfig{{Name: "m", Provider: "a", Deployments: []DeploymentConfig{{Provider: "a"}, {Provider: "a", Name: "x"}}}}, "not both"},
		{[]ModelConfig{{Name: "m", Deployments: []DeploymentConfig{{Provider: "a"}, {Provider: "a"}}}}, `named "a/m" is already defined`},
		{[]ModelConfig{{Name: "m", Deployments: []DeploymentConfig{{Provider: "z"}}}}, `provider "z" is not defined`},
		{[]ModelConfig{{Name: "m", Deployments: []DeploymentConfig{{Provider: "a", Weight: -2}}}}, "weight must be a positive integer"},
		{[]ModelConfig{{Name: "m", Provider: "a", Fallbacks: []string{"m"}}}, "fallbacks[0]"},
		{[]ModelConfig{{Name: "m", Provider: "a", Fallbacks: []string{"nope"}}}, "fallbacks[0]"},
	} {
		cfg := base()
		cfg.Models = c.m
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.m, err, c.want)
		}
	}
	cfg := base()
	cfg.Models = []ModelConfig{{Name: "m", Provider: "a", UpstreamModel: "u"}}
	for range 2 { // validating twice (config check, then the gateway) changes nothing
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if d := cfg.Models[0].Deployments; len(d) != 1 || d[0].Name != "a/u" || d[0].Weight != 1 || d[0].UpstreamModel != "u" {
		t.Fatalf("single form: %+v", d)
	}
	if cfg.Retry.MaxAttempts != 3 || cfg.Retry.Budget != 60*time.Second || cfg.Retry.Cooldown != 5*time.Second || cfg.Retry.MaxCooldown != 5*time.Minute {
		t.Fatalf("retry defaults %+v", cfg.Retry)
	}
	// A deployment that sends no headers fails at connect_timeout: the
	// budget must leave time for the next attempt then (a failover review:
	// at 30s each, a hung deployment's 504 was every such request's answer).
	for _, p := range cfg.Providers {
		if p.ConnectTimeout >= cfg.Retry.Budget {
			t.Fatalf("provider %s: default connect_timeout %v leaves no failover within the default retry budget %v", p.Name, p.ConnectTimeout, cfg.Retry.Budget)
		}
	}
}

// TestNegativeSettingsRefused: a negative timeout, limit or budget was
// taken silently for the setting's default (read_timeout: -1s became 60s)
// and config check said the file was valid. (Found by review.)
func TestNegativeSettingsRefused(t *testing.T) {
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.ReadTimeout = -time.Second }, "read_timeout must be 0 (its default) or more, not -1s"},
		{func(c *Config) { c.MaxDrains = -5 }, "max_drains must be 0 (its default) or more, not -5"},
		{func(c *Config) { c.MaxRequestBytes = -1 }, "max_request_bytes"},
		{func(c *Config) { c.Retry.Budget = -time.Second }, "retry.budget"},
	} {
		cfg := Config{Providers: []ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://a/v1"}},
			Models: []ModelConfig{{Name: "m", Provider: "a"}}}
		c.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

// TestNegativeSettingsAllReported: Validate returned at the first negative
// setting, before the other negatives and the providers and models were
// checked, so config check listed one problem of many (a user's walkthrough).
func TestNegativeSettingsAllReported(t *testing.T) {
	cfg := Config{MaxRequestBytes: -1, DrainTimeout: -time.Second, MaxConnections: -2,
		Retry:     RetryConfig{MaxAttempts: -1, Budget: -time.Second},
		Providers: []ProviderConfig{{Name: "a", Type: "nope", BaseURL: "http://a/v1"}}}
	err := cfg.Validate("openai")
	if err == nil {
		t.Fatal("Validate took five negative settings and an unknown provider type")
	}
	for _, want := range []string{"max_request_bytes", "drain_timeout", "max_connections", "retry.max_attempts",
		"retry.budget", `providers[0] (a): type "nope"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate said:\n%v\nwant a problem with %q", err, want)
		}
	}
}

// TestBoundedTakesOneResting: a request's attempts (a token count's, as
// prepareAttempts does a request's) are at most max_attempts, and of the
// resting deployments the plan names last only the first, whose rest ends
// soonest.
func TestBoundedTakesOneResting(t *testing.T) {
	cfg := Config{Providers: []ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://a/v1"}, {Name: "b", Type: "openai", BaseURL: "http://b/v1"},
		{Name: "c", Type: "openai", BaseURL: "http://c/v1"}},
		Models: []ModelConfig{
			{Name: "m", Deployments: []DeploymentConfig{{Provider: "a"}, {Provider: "b"}}, Fallbacks: []string{"f"}},
			{Name: "f", Provider: "c"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := newRouter(cfg)
	rt, _ := r.resolve("m")
	for i, d := range rt.deployments { // b's rest ends first
		d.acquire()
		d.release(outcomeFailed, time.Duration(2-i)*time.Hour, RetryConfig{Cooldown: time.Minute, MaxCooldown: 3 * time.Hour})
	}
	names := func(as []attempt) string {
		var s []string
		for _, a := range as {
			s = append(s, a.dep.name)
		}
		return strings.Join(s, " ")
	}
	plan, ready := r.plan(rt, nil)
	if got, want := names(plan), "c/f b/m a/m"; got != want || ready != 1 {
		t.Fatalf("plan %s (%d ready), want %s (1 ready)", got, ready, want)
	}
	for max, want := range map[int]string{1: "c/f", 2: "c/f b/m", 3: "c/f b/m", 5: "c/f b/m"} {
		if got := names(bounded(plan, ready, max)); got != want {
			t.Errorf("bounded to %d: %s, want %s", max, got, want)
		}
	}
	frt, _ := r.resolve("f")
	frt.deployments[0].acquire()
	frt.deployments[0].release(outcomeFailed, 0, RetryConfig{Cooldown: 3 * time.Hour, MaxCooldown: 3 * time.Hour})
	if plan, ready = r.plan(rt, nil); ready != 0 {
		t.Fatalf("all resting: %d ready", ready)
	}
	if got, want := names(bounded(plan, ready, 3)), "b/m"; got != want {
		t.Errorf("all resting: %s, want %s", got, want)
	}
}

// TestBoundedTriesDeploymentsAtTheirLimits: the bound of one attempt to a
// resting deployment a request (bounded) spares a provider that asked for
// a pause. A deployment only at its max_concurrent or rpm_limit, which
// failed nothing and asked for nothing, counted as resting too: with both
// deployments of a model at their rpm_limit, a request whose first attempt
// failed (a 503 of the one, which rests from then on) got that failure,
// the other, healthy, never tried, where before the bound it served the
// request (review r75: 1 request of 6 answered 503). They are tried as
// the available ones are, within max_attempts, after them.
func TestBoundedTriesDeploymentsAtTheirLimits(t *testing.T) {
	cfg := Config{Providers: []ProviderConfig{{Name: "a", Type: "openai", BaseURL: "http://a/v1"}, {Name: "b", Type: "openai", BaseURL: "http://b/v1"},
		{Name: "c", Type: "openai", BaseURL: "http://c/v1"}},
		Models: []ModelConfig{
			{Name: "m", Deployments: []DeploymentConfig{{Provider: "a", RPMLimit: 1}, {Provider: "b", MaxConcurrent: 1}}, Fallbacks: []string{"f"}},
			{Name: "f", Provider: "c"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := newRouter(cfg)
	rt, _ := r.resolve("m")
	a, b := rt.deployments[0], rt.deployments[1]
	a.acquire() // its one request of the minute
	a.release(outcomeOK, 0, RetryConfig{Cooldown: time.Minute, MaxCooldown: time.Hour})
	b.acquire() // its one request open
	frt, _ := r.resolve("f")
	frt.deployments[0].acquire()
	frt.deployments[0].release(outcomeFailed, time.Hour, RetryConfig{Cooldown: time.Minute, MaxCooldown: 3 * time.Hour}) // c rests
	plan, ready := r.plan(rt, nil)
	var names []string
	for _, at := range bounded(plan, ready, 3) {
		names = append(names, at.dep.name)
	}
	got := strings.Join(names, " ")
	if len(names) != 3 || !strings.Contains(got, "a/m") || !strings.Contains(got, "b/m") || names[2] != "c/f" {
		t.Fatalf("attempts %s (plan of %d, %d ready): want a/m and b/m, at their limits, then c/f, resting", got, len(plan), ready)
	}
}
