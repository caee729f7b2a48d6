package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestConfigGuideShowsTheDefaults: docs/configuration.md says "a setting
// left out, or 0, takes the default shown" of its annotated file, so each
// setting it shows there with a default (the top level's sizes and
// timeouts, retry:, meter:, the first provider's timeouts and
// prefix_routes) must be that default: the file read as it stands equals
// the file with those settings left out.
func TestConfigGuideShowsTheDefaults(t *testing.T) {
	guide, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(guide), "## The file\n\n```yaml\n")
	file, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed {
		t.Fatal("docs/configuration.md has no yaml block under \"## The file\"")
	}
	t.Setenv("OPENAI_API_KEY", "sk-guide-123456789")
	shown, err := parseConfig("guide.yaml", []byte(file), providerTypes())
	if err != nil {
		t.Fatal(err)
	}
	// The same providers and models, every setting with a default left out.
	bare, err := parseConfig("bare.yaml", []byte(`providers:
  - {name: openai, type: openai, base_url: "https://api.openai.com/v1", api_key_env: OPENAI_API_KEY}
  - {name: local, type: openai, base_url: "http://vllm.internal:8000/v1"}
models:
  - {name: gpt-4o-mini, provider: openai}
`), providerTypes())
	if err != nil {
		t.Fatal(err)
	}
	s, b := shown.Config, bare.Config
	for _, c := range []struct {
		name        string
		shown, bare any
	}{
		{"max_request_bytes", s.MaxRequestBytes, b.MaxRequestBytes},
		{"drain_timeout", s.DrainTimeout, b.DrainTimeout},
		{"max_drains", s.MaxDrains, b.MaxDrains},
		{"read_timeout", s.ReadTimeout, b.ReadTimeout},
		{"write_timeout", s.WriteTimeout, b.WriteTimeout},
		{"idle_timeout", s.IdleTimeout, b.IdleTimeout},
		{"max_connections", s.MaxConnections, b.MaxConnections},
		{"shutdown_drain", s.ShutdownDrain, b.ShutdownDrain},
		{"retry", s.Retry, b.Retry},
		{"meter", shown.Meter, bare.Meter},
		{"providers[0].connect_timeout", s.Providers[0].ConnectTimeout, b.Providers[0].ConnectTimeout},
		{"providers[0].stall_timeout", s.Providers[0].StallTimeout, b.Providers[0].StallTimeout},
		{"providers[0].request_timeout", s.Providers[0].RequestTimeout, b.Providers[0].RequestTimeout},
		{"providers[0].prefix_routes", s.Providers[0].PrefixRoutes, b.Providers[0].PrefixRoutes},
	} {
		if c.shown != c.bare {
			t.Errorf("docs/configuration.md shows %s as %+v; its default is %+v", c.name, c.shown, c.bare)
		}
	}
}

// TestConfigGuideShowsTheEnvironmentDefaults: the defaults the guide's
// Environment table gives are those the process takes with the variables
// unset.
func TestConfigGuideShowsTheEnvironmentDefaults(t *testing.T) {
	guide, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, line := range strings.Split(string(guide), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 3 || !strings.HasPrefix(cells[0], "| `TOLLGATE_") {
			continue
		}
		documented[strings.Trim(cells[0], "| `")] = strings.Trim(cells[1], "`")
	}
	for _, v := range runtimeEnv {
		t.Setenv(v, "")
	}
	e, err := loadEnv()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"TOLLGATE_DATABASE_URL":   e.DatabaseURL,
		"TOLLGATE_ADMIN_URL":      defaultAdminURL,
		"TOLLGATE_LISTEN":         e.Listen,
		"TOLLGATE_ADMIN_LISTEN":   e.AdminListen,
		"TOLLGATE_DATA_DIR":       e.DataDir,
		"TOLLGATE_SHUTDOWN_GRACE": e.ShutdownGrace.String(),
	} {
		if got, ok := documented[name]; !ok {
			t.Errorf("docs/configuration.md's Environment table has no row for %s", name)
		} else if got != want {
			t.Errorf("docs/configuration.md gives %s's default as %q; the process takes %q", name, got, want)
		}
	}
	for _, v := range runtimeEnv {
		if _, ok := documented[v]; !ok {
			t.Errorf("docs/configuration.md's Environment table has no row for %s, which tollgate reads", v)
		}
	}
}

// TestConfigGuideShowsEverySetting: config check answers an unknown
// setting with "docs/configuration.md describes every setting", so the
// guide's annotated file names each field the file's structs take (api_key
// as a comment beside api_key_env).
func TestConfigGuideShowsEverySetting(t *testing.T) {
	guide, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(guide), "## The file\n\n```yaml\n")
	file, _, _ := strings.Cut(rest, "\n```")
	var walk func(prefix string, typ reflect.Type)
	n := 0
	walk = func(prefix string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ.PkgPath() == "time" {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if opts == "inline" {
				walk(prefix, f.Type)
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			n++
			if !regexp.MustCompile(`(?m)(^|[\s{,])` + regexp.QuoteMeta(name) + `:`).MatchString(file) {
				t.Errorf("docs/configuration.md's annotated file does not show %s%s", prefix, name)
			}
			walk(prefix+name+".", f.Type)
		}
	}
	walk("", reflect.TypeOf(fileConfig{}))
	if n < 40 {
		t.Fatalf("walked %d settings; want every one of fileConfig", n)
	}
}
