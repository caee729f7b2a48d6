package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const adminToken = "faults-admin-token"

// stack is everything the suite runs: its own Postgres cluster, a NATS
// process, upstream-sim, meter workers, a gateway and an admin API, each
// a process of its own so that it can be stopped or killed.
type stack struct {
	root      string // temporary directory: binaries, config, logs, data
	ps        *procs
	pg        *pgCluster
	self      string // this binary, re-executed as `natsd`
	tollgate  string
	simBin    string
	cfgPath   string
	natsAddr  string
	natsDir   string
	nats      *proc
	simAddr   string
	sim       *proc
	gwAddr    string
	gwData    string
	gw        *proc
	adminAddr string
	admin     *proc
	meters    []*proc
	started   int // meter processes started so far (they are named meter-N)
	db        *pgxpool.Pool
	nc        *nats.Conn
	js        jetstream.JetStream
	loader    *loader
	key       string // the load's API key
	customer  string // the load's customer
	// foreign and foreignKey are a second customer and its key, whose
	// events the suite itself publishes or spools (poison, as a foreign
	// publisher would): upstream-sim never sees them, so the load
	// customer's figures stay comparable with its ground truth.
	foreign, foreignKey string
	poison              []poisonItem // every poison event injected, checked at the end
}

// build compiles tollgate and upstream-sim into the stack's directory.
func (s *stack) build(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		return fmt.Errorf("run the suite from inside the tollgate module (go env GOMOD: %q, %v)", out, err)
	}
	mod := filepath.Dir(strings.TrimSpace(string(out)))
	s.tollgate, s.simBin = filepath.Join(s.root, "tollgate"), filepath.Join(s.root, "upstream-sim")
	for bin, pkg := range map[string]string{s.tollgate: "./cmd/tollgate", s.simBin: "./cmd/upstream-sim"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = mod
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return nil
}

// writeConfig writes the config: upstream-sim as an OpenAI provider that
// is cut off after 1s of silence, a model with cache and reasoning
// (sim-pro) and one without (sim-small), a model "smart" of two
// deployments, east and west (upstream-sim under /d/east and /d/west, so
// that it counts each; failover with short cool-downs), prices, and a
// meter whose unacknowledged events are redelivered after 5s.
func (s *stack) writeConfig() error {
	s.cfgPath = filepath.Join(s.root, "tollgate.yaml")
	cfg := fmt.Sprintf(`providers:
  - name: sim
    type: openai
    base_url: http://%s/v1
    api_key: sim-key
    connect_timeout: 5s
    stall_timeout: 1s
  - {name: east, type: openai, base_url: "http://%[1]s/d/east/v1", api_key: sim-key, connect_timeout: 5s, stall_timeout: 1s}
  - {name: west, type: openai, base_url: "http://%[1]s/d/west/v1", api_key: sim-key, connect_timeout: 5s, stall_timeout: 1s}
models:
  - {name: sim-pro, provider: sim}
  - {name: sim-small, provider: sim}
  - name: smart
    deployments: [{name: east, provider: east}, {name: west, provider: west}]
retry: {max_attempts: 2, cooldown: 100ms, max_cooldown: 400ms}
drain_timeout: 10s
prices:
  - {model: sim-pro, currency: USD, input: "2.50", cached_input: "1.25", output: "10.00", effective_from: 2020-01-01T00:00:00Z}
  - {model: sim-small, currency: USD, input: "0.15", output: "0.60", effective_from: 2020-01-01T00:00:00Z}
  - {model: smart, currency: USD, input: "1.00", output: "4.00", effective_from: 2020-01-01T00:00:00Z}
meter:
  ack_wait: 5s
  batch_wait: 20ms
  batch_size: 200
`, s.simAddr)
	return os.WriteFile(s.cfgPath, []byte(cfg), 0o644)
}

func (s *stack) env(extra ...string) []string {
	return append([]string{"TOLLGATE_DATABASE_URL=" + s.pg.URL(), "TOLLGATE_NATS_URL=nats://" + s.natsAddr,
		"TOLLGATE_ADMIN_TOKEN=" + adminToken, "TOLLGATE_SHUTDOWN_GRACE=5s",
		"TOLLGATE_LISTEN=127.0.0.1:0", "TOLLGATE_ADMIN_LISTEN=127.0.0.1:0"}, extra...) // the role's own listeners win
}

// startTollgate starts `tollgate ROLE` and waits until it runs.
func (s *stack) startTollgate(ctx context.Context, name, role string, env ...string) (*proc, error) {
	p, err := s.ps.start(name, s.env(env...), s.tollgate, role, "--config", s.cfgPath)
	if err != nil {
		return nil, err
	}
	return p, p.waitLog(ctx, "tollgate running", 60*time.Second)
}

func (s *stack) startMeter(ctx context.Context) error {
	s.started++
	p, err := s.startTollgate(ctx, fmt.Sprintf("meter-%d", s.started), "meter",
		"TOLLGATE_DATA_DIR="+filepath.Join(s.root, "meter-data"))
	if err == nil {
		s.meters = append(s.meters, p)
	}
	return err
}

func (s *stack) startGateway(ctx context.Context) (err error) {
	s.gw, err = s.startTollgate(ctx, "gateway", "gateway", "TOLLGATE_LISTEN="+s.gwAddr, "TOLLGATE_DATA_DIR="+s.gwData)
	return err
}

// up starts the whole stack and creates the load's customer and key.
func (s *stack) up(ctx context.Context, meters int) error {
	var err error
	for _, a := range []*string{&s.natsAddr, &s.simAddr, &s.gwAddr, &s.adminAddr} {
		if *a, err = freeAddr(); err != nil {
			return err
		}
	}
	s.natsDir, s.gwData = filepath.Join(s.root, "nats"), filepath.Join(s.root, "gateway-data")
	step := func(what string, f func() error) {
		if err == nil {
			t := time.Now()
			if err = f(); err != nil {
				err = fmt.Errorf("%s: %w", what, err)
			} else {
				logf("%-28s %s", what, time.Since(t).Round(time.Millisecond))
			}
		}
	}
	step("build tollgate, upstream-sim", func() error { return s.build(ctx) })
	step("initdb private Postgres", func() error { s.pg, err = newPG(ctx); return err })
	step("start Postgres", func() error { return s.pg.start(ctx) })
	step("writeConfig", s.writeConfig)
	step("tollgate migrate", func() error {
		cmd := exec.CommandContext(ctx, s.tollgate, "migrate")
		cmd.Env = append(os.Environ(), s.env()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		s.db, err = pgxpool.New(ctx, s.pg.URL())
		return err
	})
	step("start NATS (natsd process)", func() error { return s.startNATS(ctx) })
	step("start upstream-sim", func() error {
		s.sim, err = s.ps.start("upstream-sim", nil, s.simBin, "-listen", s.simAddr)
		if err == nil {
			err = s.sim.waitLog(ctx, "upstream-sim listening", 20*time.Second)
		}
		return err
	})
	step("start admin", func() error {
		s.admin, err = s.startTollgate(ctx, "admin", "admin", "TOLLGATE_ADMIN_LISTEN="+s.adminAddr)
		return err
	})
	for range meters {
		step("start meter worker", func() error { return s.startMeter(ctx) })
	}
	step("start gateway", func() error { return s.startGateway(ctx) })
	step("create customer and key", func() error { return s.createKey(ctx) })
	step("connect to NATS", s.connectNATS)
	return err
}

// down stops everything and removes the stack's files.
func (s *stack) down() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.db != nil {
		s.db.Close()
	}
	s.ps.cleanup()
	if s.pg != nil {
		s.pg.destroy()
	}
}

// createKey creates the load's customer and API key, and the foreign
// customer and key, through the admin API, and waits until the gateway's
// key snapshot has the load's.
func (s *stack) createKey(ctx context.Context) error {
	var c struct{ ID string }
	if err := s.adminDo(ctx, "POST", "/admin/v1/customers", `{"name":"faults"}`, &c); err != nil {
		return err
	}
	var k struct{ Key string }
	if err := s.adminDo(ctx, "POST", "/admin/v1/customers/"+c.ID+"/keys", `{"name":"load"}`, &k); err != nil {
		return err
	}
	s.customer, s.key = c.ID, k.Key
	var fc, fk struct{ ID string }
	if err := s.adminDo(ctx, "POST", "/admin/v1/customers", `{"name":"faults-foreign"}`, &fc); err != nil {
		return err
	}
	if err := s.adminDo(ctx, "POST", "/admin/v1/customers/"+fc.ID+"/keys", `{"name":"foreign"}`, &fk); err != nil {
		return err
	}
	s.foreign, s.foreignKey = fc.ID, fk.ID
	return waitFor(ctx, 20*time.Second, func() error {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.gwAddr+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /v1/models with the new key: %s", resp.Status)
		}
		return nil
	})
}

// adminDo calls the admin API and decodes a 2xx answer into out.
func (s *stack) adminDo(ctx context.Context, method, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+s.adminAddr+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode/100 != 2 {
		return &httpError{status: resp.StatusCode, body: strings.TrimSpace(buf.String())}
	}
	return json.Unmarshal(buf.Bytes(), out)
}

type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }
