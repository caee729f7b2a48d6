package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// stack is what the targets run on: the simulator, the bare proxy and
// tollgate (one `tollgate serve` per tollgate target), started here or
// given by URL.
type stack struct {
	dir              string
	sim, proxy       *child
	simURL, proxyURL string
	// gws are the tollgate targets' gateways, by target name.
	gws        map[string]*gatewayProc
	adminToken string
	dbBase     string
	keepDir    bool
	log        io.Writer
	// memoryLimit is the gateways' and the proxy's GOMEMLIMIT; empty: none.
	memoryLimit string
	// cgroupLimit is -memory-cgroup in bytes (0: none): the proxy and each
	// gateway run in a memory cgroup of their own with that limit, kept in
	// cgroups by child name.
	cgroupLimit int64
	cgroups     map[string]*memCgroup
	// split is the other processes of tollgate-split (nil without it), and
	// natsBin the nats-server it runs (-nats-bin; "": built).
	split   *splitProcs
	natsBin string
}

// gatewayProc is the gateway of one tollgate target: a `tollgate serve`
// loadgen started (child set), or a running deployment given by URL.
type gatewayProc struct {
	target          string
	child           *child
	url, adminURL   string
	key, customerID string
	dbName          string // the run's database, when loadgen made one
}

// Tollgate targets: the same gateway, its simulator provider reached over
// HTTP/1.1 or over cleartext HTTP/2 (the provider's protocol: h2c); and
// tollgate-base, another build of it (-base-tollgate-bin, HTTP/1.1), to
// compare two builds in one interleaved run.
const (
	targetTollgate     = "tollgate"
	targetTollgateH2C  = "tollgate-h2c"
	targetTollgateBase = "tollgate-base"
	// targetTollgateSplit is tollgate as docker-compose.yaml deploys it:
	// `tollgate gateway`, `tollgate meter` and `tollgate admin`, each a
	// process of its own, and a nats-server process (split.go).
	targetTollgateSplit = "tollgate-split"
)

// isTollgate reports whether target is a tollgate target.
func isTollgate(target string) bool {
	switch target {
	case targetTollgate, targetTollgateH2C, targetTollgateBase, targetTollgateSplit:
		return true
	}
	return false
}

// upstreamMode says how a tollgate target reaches the simulator.
func upstreamMode(target string) string {
	if target == targetTollgateH2C {
		return "h2c"
	}
	return "HTTP/1.1"
}

// gw is the gateway of a tollgate target, nil for the others.
func (s *stack) gw(target string) *gatewayProc { return s.gws[target] }

// pid of a target's process, 0 when loadgen did not start it.
func (s *stack) pid(target string) int {
	var c *child
	switch target {
	case "sim":
		c = s.sim
	case "proxy":
		c = s.proxy
	case splitNATS, splitMeter, splitAdmin:
		c = s.split.role(target)
	default:
		if g := s.gw(target); g != nil {
			c = g.child
		}
	}
	if c == nil {
		return 0
	}
	return c.pid
}

func (s *stack) url(target string) string {
	switch target {
	case "sim":
		return s.simURL
	case "proxy":
		return s.proxyURL
	}
	if g := s.gw(target); g != nil {
		return g.url
	}
	return ""
}

// key is the customer key a target's requests carry ("" but for tollgate).
func (s *stack) key(target string) string {
	if g := s.gw(target); g != nil {
		return g.key
	}
	return ""
}

// canVerify reports whether the ledger of a tollgate target can be asked
// how many requests it holds for the run's customer.
func (s *stack) canVerify(target string) bool {
	g := s.gw(target)
	return g != nil && g.adminURL != "" && s.adminToken != "" && g.customerID != ""
}

// dbNames are the databases loadgen made, one per tollgate it started.
func (s *stack) dbNames() []string {
	var out []string
	for _, g := range s.gws {
		if g.dbName != "" {
			out = append(out, g.dbName)
		}
	}
	return out
}

// childEnv is set in the environment of loadgen's own children (the bare
// proxy) so that a test binary re-executed as one knows what to be.
const childEnv = "LOADGEN_CHILD"

// startStack starts what cfg's targets need. The caller must call close.
func startStack(ctx context.Context, cfg *config, log io.Writer) (_ *stack, err error) {
	s := &stack{log: log, keepDir: cfg.keepLogs, adminToken: cfg.adminToken, simURL: cfg.simURL,
		gws: map[string]*gatewayProc{}, dbBase: cfg.databaseURL, memoryLimit: cfg.memoryLimit,
		cgroupLimit: cfg.memoryCgroup, cgroups: map[string]*memCgroup{}, natsBin: cfg.natsBin}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "loadgen-"); err != nil {
		return nil, err
	}
	need := map[string]bool{}
	for _, t := range cfg.targets {
		need[t] = true
	}
	external := cfg.gatewayURL != ""
	switch {
	case need[targetTollgate] && external && cfg.key == "":
		return nil, errors.New("-gateway-url needs -key")
	case need[targetTollgateH2C] && external:
		return nil, errors.New("-gateway-url is the tollgate target's; tollgate-h2c is started by loadgen only")
	}
	if external && need[targetTollgate] {
		s.gws[targetTollgate] = &gatewayProc{target: targetTollgate, url: cfg.gatewayURL, adminURL: cfg.adminURL,
			key: cfg.key, customerID: cfg.customerID}
	}
	if (need["sim"] || need["proxy"] || need[targetTollgateH2C] || (need[targetTollgate] && !external)) && s.simURL == "" {
		bin := cfg.simBin
		if bin == "" {
			if bin, err = s.buildBin(ctx, "upstream-sim"); err != nil {
				return nil, err
			}
		}
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		if s.sim, err = startChild("upstream-sim", s.dir, bin, []string{"-listen", addr}, os.Environ()); err != nil {
			return nil, err
		}
		s.simURL = "http://" + addr
		if err := waitHTTP(ctx, s.sim, s.simURL+"/v1/models", 30*time.Second); err != nil {
			return nil, err
		}
	}
	if need["proxy"] {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env := s.withMemoryLimit(append(os.Environ(), childEnv+"=proxy"))
		if s.cgroupLimit > 0 && s.memoryLimit == "" {
			// What tollgate sets itself from the cgroup's limit.
			env = append(env, fmt.Sprintf("GOMEMLIMIT=%d", int64(float64(s.cgroupLimit)*cgroupMemoryRatio)))
		}
		if s.proxy, err = s.start("proxy", self, []string{"proxy", "-listen", addr, "-target", s.simURL}, env); err != nil {
			return nil, err
		}
		s.proxyURL = "http://" + addr
		if err := waitHTTP(ctx, s.proxy, s.proxyURL+"/v1/models", 30*time.Second); err != nil {
			return nil, err
		}
	}
	for _, t := range cfg.targets {
		if isTollgate(t) && s.gws[t] == nil {
			if err := s.startTollgate(ctx, cfg, t); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func (s *stack) buildBin(ctx context.Context, name string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(s.log, "building ./cmd/%s...\n", name)
	return build(ctx, root, s.dir, name)
}

// tollgateConfig is `tollgate serve`'s configuration: the simulator as an
// OpenAI provider (reached over cleartext HTTP/2 when h2c), the model
// sim-small priced as in examples/demo.yaml, and a drain_timeout of 1s so
// that streams loadgen abandons (idle mode) are finished quickly.
func tollgateConfig(simURL string, h2c bool) string {
	protocol := ""
	if h2c {
		protocol = "\n    protocol: h2c"
	}
	return fmt.Sprintf(`providers:
  - name: sim
    type: openai
    base_url: %s/v1
    api_key: loadgen%s
models:
  - name: sim-small
    provider: sim
    upstream_model: sim-small
drain_timeout: 1s
prices:
  - {model: sim-small, currency: USD, input: "0.15", cached_input: "0.075", cache_write: "0.15", output: "0.60", effective_from: 2026-01-01T00:00:00Z}
`, simURL, protocol)
}

// startTollgate starts the gateway of a tollgate target: it creates a
// fresh database, starts `tollgate serve` on it (embedded JetStream in a
// temporary data directory), or for tollgate-split the processes of
// split mode (startSplit), and creates a customer and key through the
// admin API.
func (s *stack) startTollgate(ctx context.Context, cfg *config, target string) error {
	bin := cfg.tollgateBin
	if target == targetTollgateBase {
		bin = cfg.baseTollgateBin
	}
	var err error
	if bin == "" {
		if bin, err = s.buildBin(ctx, "tollgate"); err != nil {
			return err
		}
	}
	g := &gatewayProc{target: target}
	s.gws[target] = g
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "tollgate_loadgen_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, s.dbBase)
	if err != nil {
		return fmt.Errorf("postgres at %s: %w", s.dbBase, err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	g.dbName = name
	u, err := url.Parse(s.dbBase)
	if err != nil {
		return err
	}
	u.Path = "/" + name

	cfgPath := filepath.Join(s.dir, target+".yaml")
	if err := os.WriteFile(cfgPath, []byte(tollgateConfig(s.simURL, target == targetTollgateH2C)), 0o644); err != nil {
		return err
	}
	if s.adminToken == "" {
		s.adminToken = "loadgen-" + hex.EncodeToString(b[:])
	}
	env := append(tollgateEnv(),
		"TOLLGATE_DATABASE_URL="+u.String(),
		"TOLLGATE_ADMIN_TOKEN="+s.adminToken,
		"TOLLGATE_SHUTDOWN_GRACE=5s",
	)
	if os.Getenv("TOLLGATE_PPROF") == "1" || cfg.cpuProfileDir != "" {
		// To profile a gateway under load (/debug/pprof on its admin listener).
		env = append(env, "TOLLGATE_PPROF=1")
	}
	if target == targetTollgateSplit {
		err = s.startSplit(ctx, g, bin, cfgPath, env)
	} else {
		err = s.startServe(ctx, g, bin, cfgPath, env)
	}
	if err != nil {
		return err
	}
	return s.provision(ctx, g, "loadgen-"+hex.EncodeToString(b[:]))
}

// startServe starts the `tollgate serve` of target g with env, and waits
// until its two listeners answer.
func (s *stack) startServe(ctx context.Context, g *gatewayProc, bin, cfgPath string, env []string) error {
	listen, err := freeAddr()
	if err != nil {
		return err
	}
	admin, err := freeAddr()
	if err != nil {
		return err
	}
	env = s.withMemoryLimit(append(env,
		"TOLLGATE_LISTEN="+listen,
		"TOLLGATE_ADMIN_LISTEN="+admin,
		"TOLLGATE_DATA_DIR="+filepath.Join(s.dir, g.target+"-data"),
	))
	if g.child, err = s.start(g.target, bin, []string{"serve", "--config", cfgPath}, env); err != nil {
		return err
	}
	g.url, g.adminURL = "http://"+listen, "http://"+admin
	if err := waitHTTP(ctx, g.child, g.adminURL+"/healthz", 60*time.Second); err != nil {
		return err
	}
	return waitHTTP(ctx, g.child, g.url+"/healthz", 10*time.Second)
}

// provision creates the customer name and a key for it through g's admin
// API, and waits until g's gateway takes the key.
func (s *stack) provision(ctx context.Context, g *gatewayProc, name string) error {
	var c struct {
		ID string `json:"id"`
	}
	if err := adminCall(ctx, g.adminURL, s.adminToken, "POST", "/admin/v1/customers", `{"name":"`+name+`"}`, &c); err != nil {
		return err
	}
	var k struct {
		Key string `json:"key"`
	}
	if err := adminCall(ctx, g.adminURL, s.adminToken, "POST", "/admin/v1/customers/"+c.ID+"/keys", `{"name":"loadgen"}`, &k); err != nil {
		return err
	}
	g.customerID, g.key = c.ID, k.Key
	// Keys reach the gateway through the key bucket, in milliseconds.
	deadline := time.Now().Add(15 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", g.url+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+g.key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the new key is not accepted by the gateway after 15s (last: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// adminCall calls the admin API at adminURL with token and decodes its
// JSON answer into out.
func adminCall(ctx context.Context, adminURL, token, method, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, adminURL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return nil
}

// ledgerRequests is how many requests of the run's customer the ledger of
// a tollgate target shows: GET /admin/v1/usage?group_by=customer (the
// hourly rollups, which the meter worker updates in the transaction that
// inserts the events).
func (s *stack) ledgerRequests(ctx context.Context, target string) (int64, error) {
	g := s.gw(target)
	var page struct {
		Data []struct {
			Requests int64 `json:"requests"`
		} `json:"data"`
	}
	if err := adminCall(ctx, g.adminURL, s.adminToken, "GET", "/admin/v1/usage?group_by=customer&customer_id="+g.customerID, "", &page); err != nil {
		return 0, err
	}
	var n int64
	for _, r := range page.Data {
		n += r.Requests
	}
	return n, nil
}

// waitLedger polls the ledger of a tollgate target every 10ms until it
// shows at least want requests; it returns the time that took, the count
// seen and an error at the timeout.
func (s *stack) waitLedger(ctx context.Context, target string, want int64, timeout time.Duration) (time.Duration, int64, error) {
	start := time.Now()
	var n int64
	var err error
	for {
		n, err = s.ledgerRequests(ctx, target)
		if err == nil && n >= want {
			return time.Since(start), n, nil
		}
		if time.Since(start) > timeout || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("the ledger shows %d requests, want %d, after %v", n, want, timeout)
			}
			return time.Since(start), n, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// close stops the children (tollgate first: it publishes what it holds),
// drops the database and removes the temporary directory.
func (s *stack) close() {
	for _, g := range s.gws {
		g.child.stop(20 * time.Second)
	}
	s.split.stop()
	s.proxy.stop(5 * time.Second)
	s.sim.stop(5 * time.Second)
	for _, name := range slices.Sorted(maps.Keys(s.cgroups)) {
		fmt.Fprintf(s.log, "%s\n", s.cgroupLine(name))
		if err := s.cgroups[name].remove(); err != nil {
			fmt.Fprintf(s.log, "remove %s's memory cgroup: %v\n", name, err)
		}
	}
	for _, name := range s.dbNames() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if conn, err := pgx.Connect(ctx, s.dbBase); err == nil {
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				fmt.Fprintf(s.log, "drop database %s: %v\n", name, err)
			}
			conn.Close(ctx)
		} else {
			fmt.Fprintf(s.log, "drop database %s: %v\n", name, err)
		}
		cancel()
	}
	if s.dir != "" {
		if s.keepDir {
			fmt.Fprintf(s.log, "logs kept in %s\n", s.dir)
		} else {
			_ = os.RemoveAll(s.dir)
		}
	}
}
