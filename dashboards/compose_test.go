package dashboards

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter"
)

const repo = ".."

// loadCompose loads docker-compose.yaml as `docker compose` would, with
// the given profiles and only the admin token in the environment (so the
// ${VAR:-default}s apply).
func loadCompose(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	p, err := loadComposeEnv([]string{"TOLLGATE_ADMIN_TOKEN=a-secret-of-the-operator"}, profiles...)
	if err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	return p
}

// loadComposeEnv loads docker-compose.yaml with env as the environment.
func loadComposeEnv(env []string, profiles ...string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{filepath.Join(repo, "docker-compose.yaml")},
		cli.WithWorkingDirectory(repo), cli.WithEnv(env), cli.WithProfiles(profiles), cli.WithResolvedPaths(true))
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

// TestComposeNeedsAnAdminToken: the stack does not start on a published
// default admin token (it fell back to "demo-admin-token", which every
// reader of this repository knows): without TOLLGATE_ADMIN_TOKEN, compose
// refuses, saying what to set.
func TestComposeNeedsAnAdminToken(t *testing.T) {
	if _, err := loadComposeEnv(nil); err == nil || !strings.Contains(err.Error(), "set TOLLGATE_ADMIN_TOKEN") {
		t.Fatalf("docker-compose.yaml without TOLLGATE_ADMIN_TOKEN: %v; want it refused, naming the variable", err)
	}
	p := loadCompose(t)
	if got := deref(p.Services["tollgate-admin"].Environment["TOLLGATE_ADMIN_TOKEN"]); got != "a-secret-of-the-operator" {
		t.Fatalf("the admin's token is %q, want the environment's", got)
	}
}

var tollgateRoles = map[string]string{
	"tollgate-migrate": "migrate", "tollgate-gateway": "gateway", "tollgate-meter": "meter", "tollgate-admin": "admin",
}

func TestCompose(t *testing.T) {
	p := loadCompose(t, "demo")
	want := []string{"postgres", "nats", "tollgate-migrate", "tollgate-gateway", "tollgate-meter", "tollgate-admin",
		"upstream-sim", "prometheus", "grafana"}
	if got := slices.Sorted(func(yield func(string) bool) {
		for name := range p.Services {
			if !yield(name) {
				return
			}
		}
	}); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("services %v, want %v", got, want)
	}
	svc := func(name string) types.ServiceConfig { return p.Services[name] }

	// Images, ports, commands.
	for name, image := range map[string]string{"postgres": "postgres:15", "nats": "nats:2.10", "prometheus": "prom/prometheus:",
		"grafana": "grafana/grafana:"} {
		if !strings.HasPrefix(svc(name).Image, image) {
			t.Errorf("%s: image %q, want %s…", name, svc(name).Image, image)
		}
	}
	for name, port := range map[string]uint32{"tollgate-gateway": 8080, "tollgate-admin": 8081, "grafana": 3000, "prometheus": 9090} {
		if !slices.ContainsFunc(svc(name).Ports, func(pc types.ServicePortConfig) bool { return pc.Target == port && pc.Published != "" }) {
			t.Errorf("%s: port %d is not published", name, port)
		}
	}
	// NATS runs deploy/nats.conf, read here by nats-server's own parser:
	// JetStream on the /data volume, monitoring on 8222 (the health check),
	// and an explicit sync policy, never NATS' 2-minute default.
	nats := strings.Join(svc("nats").Command, " ")
	if nats != "-c /etc/nats/nats.conf" || !hasVolume(svc("nats"), "/data") || !mountedFile(svc("nats"), "/etc/nats/nats.conf") {
		t.Errorf("nats: command %q, want -c /etc/nats/nats.conf, mounted, with /data on a volume", nats)
	}
	opts, err := natsserver.ProcessConfigFile("../deploy/nats.conf")
	if err != nil {
		t.Fatalf("deploy/nats.conf: %v", err)
	}
	if !opts.JetStream || opts.StoreDir != "/data" || opts.HTTPPort != 8222 || opts.Port != 4222 ||
		opts.SyncInterval != meter.DefaultSync.Interval || opts.SyncAlways {
		t.Errorf("deploy/nats.conf: jetstream %v store %q http %d port %d sync %v always %v; want JetStream in /data, 8222, 4222, sync %s",
			opts.JetStream, opts.StoreDir, opts.HTTPPort, opts.Port, opts.SyncInterval, opts.SyncAlways, meter.DefaultSync)
	}
	if !hasVolume(svc("postgres"), "/var/lib/postgresql/data") {
		t.Error("postgres: no volume for its data")
	}
	if !hasVolume(svc("tollgate-gateway"), deref(svc("tollgate-gateway").Environment["TOLLGATE_DATA_DIR"])) {
		t.Error("tollgate-gateway: its data directory (the spool) is not on a volume")
	}
	if !slices.Equal(svc("upstream-sim").Profiles, []string{"demo"}) {
		t.Errorf("upstream-sim: profiles %v, want [demo]", svc("upstream-sim").Profiles)
	}
	if plain := loadCompose(t); plain.DisabledServices["upstream-sim"].Name == "" || len(plain.Services) != len(want)-1 {
		t.Error("without the demo profile, upstream-sim should be off and everything else on")
	}

	// The Tollgate processes: built here, wired to postgres and nats.
	for name, role := range tollgateRoles {
		s := svc(name)
		if s.Build == nil || s.Build.Context != mustAbs(t, repo) {
			t.Errorf("%s: not built from the repository", name)
		}
		if len(s.Command) == 0 || s.Command[0] != role {
			t.Errorf("%s: command %v, want tollgate %s", name, s.Command, role)
		}
		for v, host := range map[string]string{"TOLLGATE_DATABASE_URL": "postgres:5432", "TOLLGATE_NATS_URL": "nats:4222"} {
			if u, err := url.Parse(deref(s.Environment[v])); err != nil || u.Host != host {
				t.Errorf("%s: %s = %q, want a URL to %s", name, v, deref(s.Environment[v]), host)
			}
		}
		if i := slices.Index(s.Command, "--config"); i >= 0 && (i+1 >= len(s.Command) || !mountedFile(s, s.Command[i+1])) {
			t.Errorf("%s: its --config is not a mounted file", name)
		}
		if name != "tollgate-migrate" {
			if d, ok := s.DependsOn["tollgate-migrate"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("%s: should wait for tollgate-migrate to complete", name)
			}
		}
	}
	if deref(svc("tollgate-admin").Environment["TOLLGATE_ADMIN_TOKEN"]) == "" {
		t.Error("tollgate-admin: no TOLLGATE_ADMIN_TOKEN")
	}

	// Healthchecks and dependencies.
	listens := regexp.MustCompile(`localhost:(\d+)/`)
	for name, s := range p.Services {
		hc := s.HealthCheck
		switch {
		case hc == nil:
			t.Errorf("%s: no healthcheck", name)
		case hc.Disable:
			if s.Restart != types.RestartPolicyNo {
				t.Errorf("%s: only one-shot services (restart: \"no\") may disable their healthcheck", name)
			}
		case len(hc.Test) < 2 || (hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL"):
			t.Errorf("%s: healthcheck test %v", name, hc.Test)
		case tollgateRoles[name] != "" || name == "upstream-sim":
			// Tollgate's image: probe with the runtime's wget, on a port the process listens on.
			m := listens.FindStringSubmatch(strings.Join(hc.Test, " "))
			ports := []string{portOf(s.Environment["TOLLGATE_LISTEN"]), portOf(s.Environment["TOLLGATE_ADMIN_LISTEN"])}
			if name == "upstream-sim" {
				ports = []string{portOf(&s.Command[len(s.Command)-1])}
			}
			if hc.Test[1] != "wget" || m == nil || !slices.Contains(ports, m[1]) {
				t.Errorf("%s: healthcheck %v should wget one of its ports %v", name, hc.Test, ports)
			}
		}
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s: depends on %s, which is not an enabled service", name, dep)
			case d.Condition == types.ServiceConditionHealthy:
				if target.HealthCheck == nil || target.HealthCheck.Disable {
					t.Errorf("%s: waits for %s to be healthy, but it has no healthcheck", name, dep)
				}
			case d.Condition == types.ServiceConditionCompletedSuccessfully:
				if target.Restart != types.RestartPolicyNo {
					t.Errorf("%s: waits for %s to complete, but it restarts", name, dep)
				}
			default:
				t.Errorf("%s: depends on %s with condition %q", name, dep, d.Condition)
			}
		}
	}

	// Everything mounted or built exists; named volumes are declared.
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			switch v.Type {
			case types.VolumeTypeBind:
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("%s: mounts %s, which does not exist", name, v.Source)
				}
			case types.VolumeTypeVolume:
				if _, ok := p.Volumes[v.Source]; !ok {
					t.Errorf("%s: volume %s is not declared", name, v.Source)
				}
			}
		}
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) < 2 || !strings.HasPrefix(froms[0][1], "golang:1.26") {
		t.Fatalf("want a multi-stage build from golang:1.26, got %v", froms)
	}
	if runtime := froms[len(froms)-1][1]; !strings.HasPrefix(runtime, "alpine:") && !strings.HasPrefix(runtime, "busybox:") {
		t.Errorf("runtime image %s: the healthchecks need busybox's wget", runtime)
	}
	for _, pkg := range []string{"./cmd/tollgate", "./cmd/upstream-sim"} {
		if !strings.Contains(df, "go build") || !strings.Contains(df, pkg) {
			t.Errorf("Dockerfile does not build %s", pkg)
		}
		if _, err := os.Stat(filepath.Join(repo, pkg, "main.go")); err != nil {
			t.Error(err)
		}
	}
	if u := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(df, -1); len(u) == 0 || u[len(u)-1][1] == "root" || u[len(u)-1][1] == "0" {
		t.Error("the runtime image should run as a non-root USER")
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY\s+([^-\n][^\n]*)\s+\S+$`).FindAllStringSubmatch(df, -1) {
		for _, src := range strings.Fields(m[1]) {
			if _, err := os.Stat(filepath.Join(repo, src)); err != nil {
				t.Errorf("COPY %s: %v", src, err)
			}
		}
	}
	// .dockerignore must keep what the build needs.
	ignore, err := os.ReadFile(filepath.Join(repo, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(ignore), "\n") {
		pat := strings.TrimSpace(line)
		if pat == "" || pat[0] == '#' || pat[0] == '!' {
			continue
		}
		for _, need := range []string{"go.mod", "go.sum", "cmd", "cmd/tollgate", "cmd/upstream-sim", "gateway", "ledger",
			"meter", "migrations", "dashboards"} {
			if ok, _ := filepath.Match(strings.TrimPrefix(pat, "/"), need); ok {
				t.Errorf(".dockerignore: %q excludes %s, which the build needs", pat, need)
			}
		}
	}
}

// TestDeployConfig checks deploy/ against the compose file and the code:
// Prometheus scrapes each process's admin listener, Grafana's datasources
// and dashboards line up, and deploy/tollgate.yaml is a valid config.
func TestDeployConfig(t *testing.T) {
	p := loadCompose(t, "demo")
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "deploy/prometheus.yml", &prom, false)
	scraped := map[string]bool{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				host, port, _ := net.SplitHostPort(tg)
				scraped[host] = true
				if s, ok := p.Services[host]; ok && tollgateRoles[host] != "" && portOf(s.Environment["TOLLGATE_ADMIN_LISTEN"]) != port {
					t.Errorf("prometheus scrapes %s, not %s's TOLLGATE_ADMIN_LISTEN", tg, host)
				} else if !ok && host != "localhost" {
					t.Errorf("prometheus scrapes %s: no such service", tg)
				}
			}
		}
	}
	for _, s := range []string{"tollgate-gateway", "tollgate-meter", "tollgate-admin"} {
		if !scraped[s] {
			t.Errorf("prometheus does not scrape %s", s)
		}
	}

	// Prometheus runs deploy/prometheus.yml, and its rule_files load
	// dashboards/alerts.yml, mounted into the service.
	promSvc := p.Services["prometheus"]
	var promConfig string
	for _, arg := range promSvc.Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			promConfig = v
		}
	}
	if src := mountSource(promSvc, promConfig); src != mustAbs(t, filepath.Join(repo, "deploy/prometheus.yml")) {
		t.Errorf("prometheus: --config.file %q is %q, want deploy/prometheus.yml mounted", promConfig, src)
	}
	alertsLoaded := false
	for _, rf := range prom.RuleFiles {
		if !path.IsAbs(rf) {
			rf = path.Join(path.Dir(promConfig), rf)
		}
		src := mountSource(promSvc, rf)
		if src == "" {
			t.Errorf("prometheus: rule file %s is not a mounted file", rf)
		}
		alertsLoaded = alertsLoaded || src == mustAbs(t, "alerts.yml")
	}
	if !alertsLoaded {
		t.Errorf("prometheus does not load dashboards/alerts.yml (rule_files %v)", prom.RuleFiles)
	}

	// Grafana: provisioned datasources match the dashboards' references,
	// the compose services and the read-only role.
	var dsf struct {
		Datasources []struct {
			UID, Type, URL, User string
			JSONData             map[string]any    `yaml:"jsonData"`
			Secure               map[string]string `yaml:"secureJsonData"`
		}
	}
	readYAML(t, "deploy/grafana/provisioning/datasources/datasources.yaml", &dsf, false)
	grafana := p.Services["grafana"]
	role, _ := os.ReadFile(filepath.Join(repo, "deploy/postgres/10-grafana-reader.sql"))
	roleRE := regexp.MustCompile(`CREATE ROLE (\w+) LOGIN PASSWORD '([^']*)'`).FindStringSubmatch(string(role))
	found := map[string]bool{}
	for _, ds := range dsf.Datasources {
		found[ds.UID] = true
		if datasourceTypes[ds.UID] != ds.Type {
			t.Errorf("datasource %s: type %s, dashboards want %s", ds.UID, ds.Type, datasourceTypes[ds.UID])
		}
		host := strings.TrimPrefix(ds.URL, "http://")
		if i := strings.IndexAny(host, ":/"); i >= 0 {
			host = host[:i]
		}
		if _, ok := p.Services[host]; !ok {
			t.Errorf("datasource %s: %s is not a compose service", ds.UID, ds.URL)
		}
		if ds.Type == datasourceTypes["postgres"] {
			pw := strings.TrimPrefix(ds.Secure["password"], "$")
			switch {
			case roleRE == nil || ds.User != roleRE[1]:
				t.Errorf("datasource %s: user %s is not the role deploy/postgres makes", ds.UID, ds.User)
			case deref(grafana.Environment[pw]) != roleRE[2]:
				t.Errorf("datasource %s: password $%s does not match the role's", ds.UID, pw)
			case ds.JSONData["database"] != deref(p.Services["postgres"].Environment["POSTGRES_DB"]):
				t.Errorf("datasource %s: database %v is not POSTGRES_DB", ds.UID, ds.JSONData["database"])
			}
		}
	}
	for uid := range datasourceTypes {
		if !found[uid] {
			t.Errorf("no datasource with uid %s is provisioned", uid)
		}
	}
	if !slices.ContainsFunc(p.Services["postgres"].Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Target == "/docker-entrypoint-initdb.d" && v.Source == mustAbs(t, filepath.Join(repo, "deploy/postgres"))
	}) {
		t.Error("postgres does not run deploy/postgres at initialisation")
	}
	var dbf struct {
		Providers []struct{ Options struct{ Path string } }
	}
	readYAML(t, "deploy/grafana/provisioning/dashboards/dashboards.yaml", &dbf, false)
	for _, pr := range dbf.Providers {
		if !slices.ContainsFunc(grafana.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Target == pr.Options.Path && v.Source == mustAbs(t, ".")
		}) {
			t.Errorf("grafana dashboards path %s is not where compose mounts dashboards/", pr.Options.Path)
		}
	}

	// deploy/tollgate.yaml, read as `tollgate --config` reads it.
	var cfg struct {
		gateway.Config `yaml:",inline"`
		Prices         []ledger.PriceInput `yaml:"prices"`
		Meter          meter.Config        `yaml:"meter"`
	}
	readYAML(t, "deploy/tollgate.yaml", &cfg, true)
	if err := cfg.Validate(); err != nil {
		t.Errorf("deploy/tollgate.yaml: %v", err)
	}
	if err := cfg.Meter.Validate(); err != nil {
		t.Errorf("deploy/tollgate.yaml: %v", err)
	}
	models := map[string]bool{}
	for _, m := range cfg.Models {
		models[m.Name] = true
	}
	for _, pr := range cfg.Prices {
		if _, err := pr.Price(); err != nil || !models[pr.Model] {
			t.Errorf("deploy/tollgate.yaml: price for %s: %v (or no such model)", pr.Model, err)
		}
	}
	sim := p.Services["upstream-sim"]
	for _, pv := range cfg.Providers {
		u, err := url.Parse(pv.BaseURL)
		if err != nil || u.Hostname() != "upstream-sim" || u.Port() != portOf(&sim.Command[len(sim.Command)-1]) {
			t.Errorf("deploy/tollgate.yaml: provider %s at %s, want the upstream-sim service", pv.Name, pv.BaseURL)
		}
	}
}

func readYAML(t *testing.T, path string, v any, strict bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, path))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(strict)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func hasVolume(s types.ServiceConfig, target string) bool {
	return target != "" && slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeVolume && v.Target == target
	})
}

func mountedFile(s types.ServiceConfig, path string) bool {
	return slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		fi, err := os.Stat(v.Source)
		return v.Type == types.VolumeTypeBind && v.Target == path && err == nil && !fi.IsDir()
	})
}

// mountSource returns the file bind-mounted at target in s, or "".
func mountSource(s types.ServiceConfig, target string) string {
	for _, v := range s.Volumes {
		if fi, err := os.Stat(v.Source); v.Type == types.VolumeTypeBind && v.Target == target && err == nil && !fi.IsDir() {
			return v.Source
		}
	}
	return ""
}

func portOf(addr *string) string {
	if addr == nil {
		return ""
	}
	_, port, _ := net.SplitHostPort(*addr)
	return port
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func mustAbs(t *testing.T, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestComposeWaitsForTheShutdownGrace (a crash review): docker compose
// stop sends SIGTERM, then SIGKILL after the service's stop_grace_period,
// 10 s unless set; the gateway lets open streams run for
// TOLLGATE_SHUTDOWN_GRACE (30 s by default) and drains their usage for
// shutdown_drain (5 s), so every stream still open at 10 s ended crashed,
// its usage estimated, rather than cut_off with the usage it drained. Each
// tollgate service waits longer than both.
func TestComposeWaitsForTheShutdownGrace(t *testing.T) {
	const needs = 30*time.Second + 5*time.Second
	for name, s := range loadCompose(t, "demo").Services {
		if !strings.HasPrefix(name, "tollgate-") || name == "tollgate-migrate" {
			continue
		}
		if grace := deref(s.Environment["TOLLGATE_SHUTDOWN_GRACE"]); grace != "" {
			t.Fatalf("%s sets TOLLGATE_SHUTDOWN_GRACE=%s: check its stop_grace_period against it", name, grace)
		}
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= needs {
			t.Errorf("%s: stop_grace_period %v; want more than the shutdown grace and drain, %s", name, s.StopGracePeriod, needs)
		}
	}
}

// TestComposePortsCanBeMoved: the stack published fixed host ports (8080,
// 8081, 9090, 3000), so `docker compose up` failed on a host where any was
// taken. Each is now a variable whose default is the port it was:
// TOLLGATE_GATEWAY_PORT, TOLLGATE_ADMIN_PORT, PROMETHEUS_PORT, GRAFANA_PORT.
func TestComposePortsCanBeMoved(t *testing.T) {
	published := func(p *types.Project, name string, target uint32) string {
		t.Helper()
		for _, pc := range p.Services[name].Ports {
			if pc.Target == target {
				return pc.Published
			}
		}
		t.Fatalf("%s: port %d is not published", name, target)
		return ""
	}
	ports := []struct {
		service, variable string
		target            uint32
		moved             string
	}{
		{"tollgate-gateway", "TOLLGATE_GATEWAY_PORT", 8080, "18080"},
		{"tollgate-admin", "TOLLGATE_ADMIN_PORT", 8081, "18081"},
		{"prometheus", "PROMETHEUS_PORT", 9090, "19090"},
		{"grafana", "GRAFANA_PORT", 3000, "13000"},
	}
	defaults := loadCompose(t)
	env := []string{"TOLLGATE_ADMIN_TOKEN=a-secret-of-the-operator"}
	for _, pt := range ports {
		if got, want := published(defaults, pt.service, pt.target), strconv.Itoa(int(pt.target)); got != want {
			t.Errorf("%s: port %d published on %q by default, want %s", pt.service, pt.target, got, want)
		}
		env = append(env, pt.variable+"="+pt.moved)
	}
	moved, err := loadComposeEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range ports {
		if got := published(moved, pt.service, pt.target); got != pt.moved {
			t.Errorf("%s: port %d published on %q with %s=%s", pt.service, pt.target, got, pt.variable, pt.moved)
		}
	}
}
